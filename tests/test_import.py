"""config.json import: the same architecture, expressed in the schema's keys."""

import json
from pathlib import Path

import pytest

from pycore import catalog, estimate, web
from pycore.architecture import count_parameters
from pycore.hf_config import architecture_from_dict

CONFIGS = sorted((Path(__file__).resolve().parent / "configs").glob("*.json"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_transformers_config_imports_to_the_exact_count(path):
    # tests/configs/*.json are transformers' own config.to_dict() for the preset of the same name.
    expected = catalog.models()[path.stem]["params"]
    assert count_parameters(architecture_from_dict(json.loads(path.read_text()))).total == expected
    answer = json.loads(web.import_config(path.read_text()))
    assert answer["params"] == expected
    assert estimate(dict(answer["query"]))["params"]["total"] == expected


def test_multimodal_wrapper_imports_its_text_decoder():
    text = json.loads((Path(__file__).resolve().parent / "configs" / "gemma-3-1b-pt.json").read_text())
    wrapper = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"], "text_config": text}
    assert json.loads(web.import_config(json.dumps(wrapper)))["params"] == catalog.models()["gemma-3-1b-pt"]["params"]


@pytest.mark.parametrize("text,needle", [
    ('{"model_type": "llama", "hidden_size": 64}', "num_hidden_layers, num_attention_heads, vocab_size"),
    ('{"model_type": "mamba"}', "not supported"),
    ("[1, 2]", "JSON object"),
    ("{not json", "config.json"),
])
def test_bad_configs_get_a_message(text, needle):
    assert needle in json.loads(web.import_config(text))["error"]
