"""Every framework default is a value pycore accepts, and every value has a source."""

import re

import pytest

from pycore import frameworks, optimizer, schema

NAMES = sorted(frameworks.FRAMEWORKS)
# optimizer_impl is the schema's next choice key; until it lands there its choices are optimizer.KERNELS.
NEW_KEYS = {"optimizer_impl": optimizer.KERNELS}
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
        values = schema.parse({k: v for k, v in framework.defaults.items() if k not in NEW_KEYS})
        assert values["optimizer"] in optimizer.STATES
