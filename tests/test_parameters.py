"""Exact parameter counts."""

import json
from pathlib import Path

import pytest

from pycore import catalog
from pycore.architecture import count_parameters
from pycore.estimate import resolve_architecture
from pycore.schema import parse

MEASURED = json.loads((Path(__file__).resolve().parent.parent / "validation" / "measured.json").read_text())


@pytest.mark.parametrize("model_id", sorted(catalog.models()))
def test_preset_count_matches_recorded_transformers_count(model_id):
    # 'params' in presets/models.json is sum(p.numel()) of the transformers model, as recorded by
    # validation/measure.py for the full-size presets it builds.
    assert count_parameters(catalog.architecture(model_id)).total == catalog.models()[model_id]["params"]


@pytest.mark.parametrize("case", MEASURED["cases"], ids=lambda c: c["label"])
def test_count_matches_transformers_to_the_parameter(case):
    # validation/measured.json: sum(p.numel() for p in model.parameters()) of the model measured.
    arch = resolve_architecture(parse(case["inputs"]))
    assert count_parameters(arch).total == case["params"]


def test_recorded_full_size_counts_agree_with_presets():
    seen = {}
    for case in MEASURED["cases"]:
        inputs = case["inputs"]
        if set(inputs) & {"layers", "hidden", "vocab", "ffn"}:
            continue
        seen[inputs["model"]] = case["params"]
    assert seen, "no full-size case recorded"
    for model_id, params in seen.items():
        assert catalog.models()[model_id]["params"] == params


def test_llama_3_1_8b_is_the_published_size():
    # Meta's model card: "8B"; transformers reports 8,030,261,248 (validation/measured.json).
    counts = count_parameters(catalog.architecture("llama-3.1-8b"))
    assert counts.total == 8_030_261_248


def test_mixtral_active_parameters():
    # Mistral AI, "Mixtral of experts" (2024): 46.7B total, 12.9B active per token with 2 of 8 experts.
    counts = count_parameters(catalog.architecture("mixtral-8x7b"))
    assert round(counts.total / 1e9, 1) == 46.7
    assert round(counts.active / 1e9, 1) == 12.9


def test_gpt2_small_is_124m():
    # Radford et al. 2019 / transformers GPT2LMHeadModel: 124,439,808 parameters with the tied head.
    assert count_parameters(catalog.architecture("gpt2")).total == 124_439_808
