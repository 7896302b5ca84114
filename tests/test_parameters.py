"""Exact parameter counts."""

import json
from pathlib import Path

import pytest

from pycore.inputs.schema import parse
from pycore.memory.estimate import resolve_architecture
from pycore.model import catalog
from pycore.model.architecture import count_parameters
from pycore.model.hf_config import architecture_from_dict

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


CONFIG_COUNTS = json.loads((Path(__file__).resolve().parent.parent / "validation" / "config_counts.json").read_text())


def _published(name):
    path = Path(__file__).resolve().parent / "configs" / name
    return count_parameters(architecture_from_dict(json.loads(path.read_text())))


@pytest.mark.parametrize("name,non_embedding", [("pythia-160m.json", 85_056_000), ("variants/pythia-1b.json", 805_736_448)])
def test_pythia_non_embedding_parameters(name, non_embedding):
    # EleutherAI's Pythia model card, table "Non-Embedding Params": 85,056,000 (160M) and 805,736,448 (1.0B);
    # the totals are transformers' (validation/config_counts.json). Pythia's input and output embeddings are untied.
    counts = _published(name)
    assert counts.total == CONFIG_COUNTS["counts"][name]
    assert counts.total - 2 * counts.embedding == non_embedding


@pytest.mark.parametrize("name,total,active,embedding_counted", [
    ("qwen1.5-moe-a2.7b.json", 14.3, 2.7, True),        # Qwen1.5-MoE-A2.7B model card: 14.3B total, 2.7B activated
    ("qwen2-57b-a14b.json", 57, 14, True),              # Qwen2-57B-A14B model card: 57B total, 14B activated
    ("deepseek-v2.json", 236, 21, True),                # DeepSeek-V2 paper (2024), abstract: 236B total, 21B activated
    ("deepseek-v2-lite.json", 15.7, None, False),       # DeepSeek-V2-Lite model card: 15.7B total (its "2.4B
                                                        # activated" is 2.45B without the embedding: not checked)
    ("gpt-oss-20b.json", 20.91, 3.61, False),           # gpt-oss model card, table 1: 20.91B total, 3.61B active
])
def test_moe_totals_and_active_parameters_match_the_publishers(name, total, active, embedding_counted):
    # The publishers round; the exact totals are transformers' (validation/config_counts.json). gpt-oss's active
    # figure leaves out the input embedding table, as OpenAI's does.
    counts = _published(name)
    assert counts.total == CONFIG_COUNTS["counts"][name]
    digits = len(str(total).partition(".")[2])
    assert round(counts.total / 1e9, digits) == total
    shown = counts.active - (0 if embedding_counted else counts.embedding)
    if active is not None:
        assert round(shown / 1e9, len(str(active).partition(".")[2])) == active
