"""The inputs and model stages' tables: what the readers by kind and by family must cover, and the units the
page will read from Python. The families' counts themselves are checked against transformers in test_import."""

import pytest

from pycore.base.units import GIB, TIB, TIB_FROM_BYTES, format_bytes
from pycore.inputs import schema
from pycore.model import hf_config
from pycore.model.hf_config import architecture_from_dict

LLAMA = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
         "intermediate_size": 128, "vocab_size": 1000}


def test_tib_from_its_threshold_on():
    assert TIB_FROM_BYTES == 1024 * GIB == TIB
    assert format_bytes(TIB_FROM_BYTES - 1)["text"].endswith(" GiB")
    assert format_bytes(TIB_FROM_BYTES) == {"text": "1.00 TiB", "gb_text": "1,099.51 GB"}
    assert format_bytes(-TIB_FROM_BYTES)["text"] == "-1.00 TiB"


def test_every_kind_has_one_reader():
    kinds = {field.kind for field in schema.FIELDS}
    assert kinds <= set(schema._NUMBERS) | set(schema._WORDS)
    assert not set(schema._NUMBERS) & set(schema._WORDS)


@pytest.mark.parametrize("text,value", [("2GiB", ("bytes", 2 * GIB)), ("800MiB", ("bytes", 800 * 2**20)),
                                        ("1536", ("bytes", 1536)), ("10%", ("percent", 10.0))])
def test_overhead_reads_and_writes_back(text, value):
    field = schema.BY_KEY["overhead"]
    assert field.parse(text) == value
    assert schema.format_value(field, value) == text


def test_int_span_is_the_range_and_the_words():
    layers, experts = schema.BY_KEY["layers"], schema.BY_KEY["experts"]
    assert (layers.minimum, layers.maximum, layers.accepts) == (1, 10_000, "a whole number from 1 to 10,000")
    assert (experts.minimum, experts.parse("0")) == (0, 0)
    with pytest.raises(schema.InputError, match="layers: got '10001'; accepts 1 to 10,000"):
        layers.parse("10001")
    assert (schema.BY_KEY["seq"].unit, schema.BY_KEY["seq"].maximum) == ("tokens", 100_000_000)


def test_parse_not_strict_answers_values_and_errors():
    values, errors = schema.parse({"batch": "0", "seq": "4096", "nope": "1"}, strict=False)
    assert values["seq"] == 4096 and values["batch"] == schema.DEFAULTS["batch"]
    assert set(errors) == {"batch", "nope"}


def test_every_family_reader_is_a_family():
    assert set(hf_config._SPECIFICS) <= set(hf_config.FAMILIES)


def test_an_unknown_model_type_reads_llamas_bias_keys():
    warnings: "list[str]" = []
    arch = architecture_from_dict({**LLAMA, "model_type": "my_decoder", "attention_bias": True, "mlp_bias": True},
                                  warnings=warnings)
    assert (arch.hf_class, arch.qkv_bias, arch.out_bias, arch.mlp_bias) == ("LlamaForCausalLM", True, True, True)
    assert len(warnings) == 1


@pytest.mark.parametrize("keys,kv_heads,norms", [
    ({}, 1, 1),                                                             # multi_query by default
    ({"multi_query": False}, 4, 1),
    ({"new_decoder_architecture": True, "num_kv_heads": 2}, 2, 2),
    ({"new_decoder_architecture": True, "num_ln_in_parallel_attn": 1}, 4, 1),
    ({"parallel_attn": False}, 1, 2),
])
def test_falcon_reads_its_own_heads_and_norms(keys, kv_heads, norms):
    config = {**LLAMA, "model_type": "falcon", **keys}
    del config["intermediate_size"]
    arch = architecture_from_dict(config)
    assert (arch.kv_heads, arch.norms_per_layer, arch.ffn) == (kv_heads, norms, 4 * 64)


def test_a_family_without_keys_of_its_own_keeps_its_traits():
    arch = architecture_from_dict({**LLAMA, "model_type": "mistral", "attention_bias": True})
    assert arch.qkv_bias is False                                   # MistralConfig has no attention_bias
