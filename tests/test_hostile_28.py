"""Hostile input found in issue 28: each case the fuzzing found, held here so it stays fixed."""

import csv
import io
import json
import shutil
import unicodedata
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest

from pycore.base.units import parse_count, parse_number, parse_size, parse_whole, printable
from pycore.inputs.schema import BY_KEY, FIELDS, parse
from pycore.output import cli, web

ROOT = Path(__file__).resolve().parent.parent
# Characters that must never be echoed raw: right-to-left override (reverses the rest of the line), the
# isolates, a zero-width space, escape (terminal sequences), bell, carriage return, line separator, NEL.
HOSTILE = "\u202e\u2066\u2069\u200b\x1b\x07\r\u2028\x85"
UNSAFE = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def unsafe(text):
    """The characters of ``text`` that do not print as themselves (a newline between lines is allowed)."""
    return [c for c in text if c != "\n" and unicodedata.category(c) in UNSAFE]


def strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def cli_run(capsys, *words):
    status = cli.main(list(words))
    out, err = capsys.readouterr()
    return status, out, err


# 1. python -m pycore fits with a GPU that is not in the catalog: the message, not a KeyError traceback.
@pytest.mark.parametrize("gpu", ["nope", "h100", "H100-SXM-80GB ", "\u202eh100"])
def test_fits_names_an_unknown_gpu_as_the_other_paths_do(capsys, gpu):
    status, out, err = cli_run(capsys, "fits", f"gpu={gpu}")
    assert status == 2 and out == ""
    assert err.startswith("error: gpu: unknown GPU") and "python -m pycore gpus" in err
    assert len(err.strip().splitlines()) == 1 and not unsafe(err.strip())
    plain_status, _, plain_err = cli_run(capsys, f"gpu={gpu}")        # the estimate's own message
    assert plain_status == 2 and plain_err == err


def test_fits_still_lists_the_presets_on_a_known_gpu(capsys):
    status, out, err = cli_run(capsys, "fits", "gpu=h100-sxm-80gb", "--json")
    rows = json.loads(out)
    assert status == 0 and err == "" and {"gpt2", "llama-3.1-8b"} <= {row["id"] for row in rows}


# 2. A carriage return inside a CSV cell: csv.writer(lineterminator="\n") quotes \n but not \r, so the
#    config path "./\r=1+1.json" started a row with a formula.
def test_a_carriage_return_in_a_config_path_does_not_start_a_csv_row(capsys, tmp_path, monkeypatch):
    name = "./\r=1+1.json"
    shutil.copy(ROOT / "tests/configs/llama-3.1-8b.json", tmp_path / name)
    monkeypatch.chdir(tmp_path)
    status, out, _ = cli_run(capsys, "--csv", f"config={name}")
    assert status == 0
    lines = out.split("\n")
    assert "\r" not in out and not any(line[:1] in "=+-@" for line in lines if line)
    rows = list(csv.reader(io.StringIO(out)))
    assert all(len(row) == 5 for row in rows)
    assert ["input", "config", "./?=1+1.json", "", ""] in rows


@pytest.mark.parametrize("name", ["=1+1", "+1", "-1+1", "@SUM(A1)", "\t=1+1", "\r=1+1", "\u202e=1+1",
                                  "a\r\n=1+1", "x\u2028=1+1", "x\x0b=1+1"])
def test_no_csv_cell_begins_a_formula_or_holds_a_line_break(name):
    text = web.csv(urlencode({"model": "gpt2", "seq": "512", "name": name}))
    rows = list(csv.reader(io.StringIO(text)))
    assert all(len(row) == 5 for row in rows)
    named = [row for row in rows if row[:2] == ["input", "name"]]
    assert len(named) == 1 and named[0][2][:1] not in ("=", "+", "-", "@", "\t", "\r")
    assert not unsafe(text) and text.count("\n") == len(rows)


# 3. Digits of other scripts: refused by name, with what is accepted, never read as numbers.
@pytest.mark.parametrize("key,text", [("batch", "٣"), ("seq", "१०२४"), ("batch", "１"), ("dp", "৪"),
                                      ("mfu", "٠.٥"), ("price", "２.5"), ("params", "７B"), ("overhead", "٣%"),
                                      ("overhead", "٣GiB"), ("act_per_sample", "١GiB"), ("gpu_util", "0.٩")])
def test_digits_other_than_ascii_are_refused_naming_the_field(key, text):
    values, errors = parse({key: text}, strict=False)
    assert values[key] == BY_KEY[key].default
    assert errors[key] == (f"{key}: got {text!r} (only the digits 0-9 are read); "
                           f"accepts {BY_KEY[key].accepts}")


def test_ascii_numbers_are_read_as_before():
    values = parse({"batch": "3", "seq": "1024", "mfu": "0.5", "price": "+2.5", "params": "7B",
                    "overhead": "10%", "gpu_util": ".9", "act_multiplier": "1e1"})
    assert (values["batch"], values["seq"], values["mfu"], values["price"]) == (3, 1024, 0.5, 2.5)
    assert (values["params"], values["overhead"], values["gpu_util"]) == (7 * 10**9, ("percent", 10.0), 0.9)
    assert values["act_multiplier"] == 10.0


@pytest.mark.parametrize("text", ["٣", "1_000", "nan", "inf", "-inf", "1e999", "", "+", "-", "0x10", "1,5"])
def test_the_number_readers_refuse_anything_but_ascii_decimals(text):
    with pytest.raises(ValueError):
        parse_number(text)
    for reader in (parse_whole, parse_count, parse_size):
        with pytest.raises(ValueError):
            reader(text)


def test_a_foreign_digit_on_the_page_is_an_error_and_the_other_inputs_stay():
    payload = json.loads(web.run("model=qwen2.5-0.5b&seq=١٠٢٤&batch=4"))
    assert "only the digits 0-9" in payload["errors"]["seq"]
    assert dict(payload["query"]) == {"model": "qwen2.5-0.5b", "batch": "4"}     # seq back at its default, batch kept


# 4. Keys and values holding U+202E and other format or control characters are echoed safely.
def test_printable_replaces_every_character_that_does_not_print_as_itself():
    assert printable("ab\u202ecd\x1b[31m\r\n\u200b\u2066e") == "ab?cd?[31m????e"
    assert printable("llama-3.1-8b · 7B ✓ ünïcode 日本") == "llama-3.1-8b · 7B ✓ ünïcode 日本"
    assert printable("x" * 100, 40) == "x" * 40


def test_an_unknown_key_is_echoed_safely_on_the_command_line(capsys):
    status, out, err = cli_run(capsys, "ab\u202ecd=1")
    assert status == 2 and out == "" and err.startswith("error: ab?cd: unknown key")
    assert not unsafe(err.strip())


def test_the_page_names_a_links_unread_keys_safely():
    query = urlencode([("config", ""), ("ev\u202eil", ""), ("x\r\ny", ""), ("", "")])
    assert web.unread(query) == ("Ignored keys this page does not take from a link: config, ev?il, x??y, "
                                 "(an empty key).")
    assert web.unread("evil=") == "Ignored a key this page does not take from a link: evil."
    many = "&".join(f"k{i}=" for i in range(8))
    assert web.unread(many) == "Ignored keys this page does not take from a link: k0, k1, k2, k3, k4 and 3 more."
    assert web.unread("") == ""


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.key)
def test_no_payload_echoes_a_format_or_control_character(field):
    """Every input given hostile text, as a key and a value: no string the page draws holds one raw.
    (``query`` and the comparison's ``baseline_query`` are the inputs themselves, written back to the URL,
    never drawn.)"""
    value = quote("gpt2" + HOSTILE + "x")
    for query in (f"{field.key}={value}&model=gpt2&seq=256", f"base.{field.key}={value}&model=gpt2&seq=256",
                  f"{quote(field.key + HOSTILE)}=1&model=gpt2&seq=256"):
        for payload in (json.loads(web.run(query)), json.loads(web.answers(query))):
            payload.pop("query", None)
            if payload.get("answers") and payload["answers"].get("comparison"):
                payload["answers"]["comparison"].pop("baseline_query")
            assert [s for s in strings(payload) if unsafe(s)] == [], query


@pytest.mark.parametrize("mode", ["", "--json", "--csv", "--markdown", "--gpus=all"])
def test_no_command_line_output_echoes_a_format_or_control_character(capsys, mode):
    hostile = "gpt2" + HOSTILE
    for words in (["model=" + hostile], ["name=" + hostile, "model=gpt2", "seq=256"], [hostile + "=1"],
                  ["gpu=" + hostile], ["batch=" + hostile], ["model=gpt2", "seq=256", "--compare",
                                                             "precision=" + hostile]):
        _, out, err = cli_run(capsys, *([mode] if mode else []), *words)
        if mode == "--json" and out:
            out = json.dumps(json.loads(out), ensure_ascii=False)   # the escapes as the characters they are
        assert unsafe(out) == [] and unsafe(err) == [], words


@pytest.mark.parametrize("change", [{"model_type": "llama\u202e\x1b[2J\r"}, {"_name_or_path": "x\u202ey\r"},
                                    {"architectures": ["Llama\u2066ForCausalLM"]}, {"num_hidden_layers": "3\u202e"},
                                    {"torch_dtype": "bf16\u202e"}])
def test_an_imported_configs_own_text_is_echoed_safely(change):
    config = json.loads((ROOT / "tests/configs/llama-3.1-8b.json").read_text())
    out = json.loads(web.import_config(json.dumps({**config, **change})))
    shown = [out.get("message", ""), out.get("error", ""), *out.get("warnings", [])]
    assert any(shown) and [s for s in shown if unsafe(s)] == []
