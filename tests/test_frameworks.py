"""Every framework default is a value pycore accepts, and every value has a source."""

import re

import pytest

from pycore.inputs import frameworks, schema
from pycore.memory import optimizer

NAMES = sorted(frameworks.FRAMEWORKS)
NEW_KEYS: dict = {}
BEHAVIOUR_DTYPES = set(schema.DTYPES) | {"weight"}
# "repo path@version": a GitHub owner/name, a path and a tag or release.
CITATION = re.compile(r"[\w.-]+/[\w.-]+( [\w./-]+@[\w.-]+)?")


def test_the_frameworks_asked_for_are_there():
    assert {"pytorch", "hf-trainer", "accelerate", "lightning", "torchtune", "torchtitan", "megatron",
            "deepspeed"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_defaults_are_valid_schema_values(name):
    for key, value in frameworks.FRAMEWORKS[name].defaults.items():
        assert isinstance(value, str), key
        if key in NEW_KEYS:
            assert value in NEW_KEYS[key], key
            continue
        assert key in schema.BY_KEY, key
        assert schema.BY_KEY[key].parse(value) is not None, key


@pytest.mark.parametrize("name", NAMES)
def test_every_default_and_behaviour_has_a_source(name):
    framework = frameworks.FRAMEWORKS[name]
    assert framework.version
    for key in (*framework.defaults, *framework.behaviours):
        source = framework.sources.get(key, "")
        assert CITATION.match(source), f"{name}.{key}: {source!r}"


@pytest.mark.parametrize("name", NAMES)
def test_behaviours_use_known_keys_and_dtypes(name):
    behaviours = frameworks.FRAMEWORKS[name].behaviours
    assert set(behaviours) <= {"grad_accum_dtype", "reduce_dtype", "recompute_saves"}
    for key in ("grad_accum_dtype", "reduce_dtype"):
        if key in behaviours:
            assert behaviours[key] in BEHAVIOUR_DTYPES, key


@pytest.mark.parametrize("name", NAMES)
def test_describe_is_one_line_naming_the_defaults(name):
    line = frameworks.describe(name)
    assert "\n" not in line and line.startswith("as ") and "does by default: " in line
    for key, value in frameworks.FRAMEWORKS[name].defaults.items():
        assert f"{key}={value}" in line


def test_defaults_parse_together_as_one_estimate_input():
    for framework in frameworks.FRAMEWORKS.values():
        values = schema.parse(dict(framework.defaults))
        assert values["optimizer"] in optimizer.STATES


def test_auto_inputs_follow_the_framework():
    from pycore import estimate
    # torchtune's recipes: fused AdamW, bf16, chunked loss of 8, full activation checkpointing.
    tune = estimate({"model": "llama-3.1-8b", "framework": "torchtune"}).as_dict()["setup"]
    assert tune["precision"] == "bf16" and tune["optimizer_impl"] == "fused"
    plain = estimate({"model": "llama-3.1-8b", "framework": "pytorch"}).as_dict()["setup"]
    assert plain["precision"] == "fp32" and plain["optimizer_impl"] == "foreach"
    # The Trainer trains the checkpoint's dtype: Llama 3.1 is bfloat16, GPT-2 float32.
    assert estimate({"model": "llama-3.1-8b"}).setup.precision == "bf16"
    assert estimate({"model": "gpt2", "seq": "1024"}).setup.precision == "fp32"
    # A value the user sets wins over the framework's.
    assert estimate({"model": "llama-3.1-8b", "framework": "torchtune", "optimizer_impl": "foreach"}
                    ).setup.optimizer_impl == "foreach"


def test_the_issue_example_fused_adamw_bf16():
    # Issue 10: llama-3.1-8b, bf16, batch 1, seq 2048 with the Trainer's fused AdamW: weights, gradients
    # and two AdamW states in bf16 are 8 bytes a parameter (59.8 GiB) and the step adds nothing; the
    # foreach kernel would add one more state-sized temporary (2 bytes a parameter) at the step.
    from pycore import estimate
    fused = estimate({"model": "llama-3.1-8b", "precision": "bf16"}).as_dict()
    foreach = estimate({"model": "llama-3.1-8b", "precision": "bf16", "optimizer_impl": "foreach"}).as_dict()
    assert fused["components"].get("optimizer_step_temporaries", 0) == 0
    assert foreach["components"]["optimizer_step_temporaries"] == 8_030_261_248 * 2
    assert fused["total_bytes"] < foreach["total_bytes"]
