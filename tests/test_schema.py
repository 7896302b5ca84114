"""The schema: one table of keys for URL, command line, form and CSV."""

from pathlib import Path

import pytest

from pycore.inputs import schema
from pycore.inputs.schema import InputError, parse

ROOT = Path(__file__).resolve().parent.parent


def test_docs_table_is_generated_from_the_code():
    assert (ROOT / "docs" / "inputs.md").read_text() == schema.markdown_table()


def test_issue_keys_exist():
    required = ("model config layers hidden heads kv_heads head_dim ffn vocab experts experts_per_token params "
                "mode batch seq new_tokens precision weight_dtype grad_dtype master_dtype opt_dtype act_dtype "
                "kv_dtype optimizer recompute attention activations act_multiplier act_per_sample overhead gpu")
    assert set(required.split()) <= set(schema.BY_KEY)


def test_every_field_has_label_group_and_meaning():
    groups = {g for g, _ in schema.GROUPS}
    for field in schema.FIELDS:
        assert field.key in schema.LABELS and field.group in groups and field.meaning


@pytest.mark.parametrize("text,expected", [("7B", 7_000_000_000), ("350M", 350_000_000), ("7e9", 7_000_000_000),
                                           ("7000000000", 7_000_000_000), ("1.5k", 1500)])
def test_parameter_counts_in_the_forms_people_write(text, expected):
    assert parse({"params": text})["params"] == expected


@pytest.mark.parametrize("alias,policy", [("32-true", "fp32"), ("bf16-mixed", "amp-bf16"), ("16-mixed", "amp-fp16"),
                                          ("bf16-true", "bf16"), ("16-true", "fp16")])
def test_lightning_precision_names(alias, policy):
    assert parse({"precision": alias})["precision"] == policy


@pytest.mark.parametrize("text,expected", [("2GiB", ("bytes", 2 * 2**30)), ("10%", ("percent", 10.0)),
                                           ("512MiB", ("bytes", 512 * 2**20)), ("1.5GB", ("bytes", 1_500_000_000))])
def test_overhead_as_size_or_percent(text, expected):
    assert parse({"overhead": text})["overhead"] == expected


@pytest.mark.parametrize("key,value", [("batch", "-1"), ("batch", "abc"), ("batch", "1.5"), ("seq", "nan"),
                                       ("precision", "fp64"), ("optimizer", "adamx"), ("act_multiplier", "inf"),
                                       ("overhead", "lots"), ("params", "7Q"), ("batch", "9" * 30),
                                       ("kv_dtype", "fp4")])
def test_bad_values_name_the_key(key, value):
    with pytest.raises(InputError) as error:
        parse({key: value})
    assert error.value.key == key and str(error.value).startswith(f"{key}: ")


def test_unknown_key_is_rejected_with_the_list():
    with pytest.raises(InputError, match="unknown key"):
        parse({"bacth": "2"})


def test_lenient_parse_keeps_the_good_inputs():
    values, errors = parse({"batch": "x", "seq": "4096"}, strict=False)
    assert values["batch"] == schema.DEFAULTS["batch"] and values["seq"] == 4096 and set(errors) == {"batch"}


def test_query_round_trip():
    raw = {"model": "gpt2", "batch": "8", "precision": "bf16", "overhead": "2GiB"}
    assert dict(schema.to_query(parse(raw))) == raw
