"""Issue 28's inputs: hub ids as model names, training time as hours or as tokens, the price the cost uses with
its source. Library, command line and the page's entry points (pycore.output.web); the page itself is
tests/browser/test_page_inputs_28.py."""

import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

import pytest

import build
from pycore import FieldError, estimate, parse
from pycore.answers.answer import answer
from pycore.answers.compare import baseline_values
from pycore.inputs.applies import ignored
from pycore.inputs.schema import BY_KEY
from pycore.memory.estimate import estimate_values
from pycore.model import catalog
from pycore.output import report, web

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "tests" / "configs"


def cli(*args):
    return subprocess.run([sys.executable, "-m", "pycore", *args], cwd=ROOT, capture_output=True, text=True)


# ---- Hub ids everywhere


@pytest.mark.parametrize("model_id", sorted(catalog.models()))
def test_every_preset_knows_the_hub_id_its_source_names(model_id):
    entry = catalog.models()[model_id]
    named = re.findall(r"huggingface\.co/([A-Za-z0-9][\w.-]*/[\w.-]*\w)", entry["source"])
    assert entry["hub"] == list(dict.fromkeys(named)) and entry["hub"], entry["source"]
    for hub in entry["hub"]:
        for spelled in (hub, hub.lower(), hub.upper()):
            assert catalog.preset_id(spelled) == model_id
        assert catalog.hub_id(hub) == hub


@pytest.mark.parametrize("spelled", ["meta-llama/Llama-3.1-70B", "meta-llama/llama-3.1-70b", "META-LLAMA/LLAMA-3.1-70B",
                                     " meta-llama/Llama-3.1-70B "])
def test_a_hub_id_in_any_case_is_its_preset(spelled):
    by_id = estimate({"model": "llama-3.1-70b"})
    by_hub = estimate({"model": spelled})
    assert by_hub.total_bytes == by_id.total_bytes and by_hub.params_total == by_id.params_total
    assert by_hub.model.name == "llama-3.1-70b"
    # The summary names the preset as itself, not as a "closest preset".
    assert "Closest preset" not in json.loads(web.run(urlencode({"model": spelled})))["summary"]["model"]


def test_the_command_line_takes_a_hub_id():
    done = cli("model=meta-llama/Llama-3.1-70B", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["params"]["total"] == catalog.models()["llama-3.1-70b"]["params"]
    upper = cli("model=META-LLAMA/LLAMA-3.1-70B", "--json")
    assert upper.returncode == 0 and json.loads(upper.stdout)["total_bytes"] == json.loads(done.stdout)["total_bytes"]


@pytest.mark.parametrize("spelled,preset", [
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),       # an alias under the owner of the preset's hub id
    ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
    ("google/gemma-2-9b-it", "gemma-2-9b"),
    ("mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b-v0.3"),
])
def test_an_alias_under_the_hub_owner_is_its_preset(spelled, preset):
    assert catalog.preset_id(spelled) == preset


@pytest.mark.parametrize("spelled", ["acme/llama-3.1-8b", "llama-3.1-8b/meta-llama", "meta-llama/Llama-9-8B"])
def test_no_other_owner_or_name_is_taken(spelled):
    assert catalog.preset_id(spelled) is None


def test_an_unknown_hub_id_on_the_command_line_says_how():
    done = cli("model=acme/Foo-7B", "batch=2")
    assert done.returncode == 2 and done.stdout == ""
    assert "no preset has the hub id 'acme/Foo-7B'" in done.stderr
    assert "config=PATH" in done.stderr and "https://huggingface.co/acme/Foo-7B/resolve/main/config.json" in done.stderr
    # and the way it names works: the same family's config.json, as a file
    read = cli(f"config={CONFIGS / 'qwen2.5-0.5b.json'}", "batch=2")
    assert read.returncode == 0, read.stderr


def test_an_unknown_model_without_a_slash_is_refused_as_before():
    done = cli("model=llama-9")
    assert done.returncode == 2 and "unknown preset 'llama-9'" in done.stderr and "config=" not in done.stderr
    with pytest.raises(FieldError, match="unknown preset"):
        estimate({"model": "a/b/c"})


def test_the_page_offers_the_hub_fetch_for_an_unknown_hub_id_and_keeps_the_other_inputs():
    for entry in (web.run, web.headline):
        payload = json.loads(entry("model=acme/Foo-7B&batch=4"))
        assert payload["hub_offer"] == {"id": "acme/Foo-7B",
                                        "label": "Fetch acme/Foo-7B's config.json from the Hugging Face hub and estimate it"}
        assert "acme/Foo-7B" in payload["errors"]["model"]
        assert payload["result"]["total_bytes"] == estimate({"batch": "4"}).total_bytes   # the default model, batch kept
    for query in ("model=meta-llama/Llama-3.1-8B", "model=llama-9", "model=a/b/c", "batch=x", "model=acme/%E2%80%AEx"):
        assert json.loads(web.run(query))["hub_offer"] is None, query
        assert json.loads(web.headline(query))["hub_offer"] is None, query


def test_a_config_fetched_by_hub_id_is_named_by_it():
    text = (CONFIGS / "qwen2.5-0.5b.json").read_text()
    out = json.loads(web.import_config(text, "acme/Foo-0.5B"))
    assert ["name", "acme/Foo-0.5B"] in out["query"] and [k for k, _ in out["query"]].count("name") == 1
    assert json.loads(web.import_config(text))["query"] == json.loads(web.import_config(text, "not a hub id"))["query"]
    shown = json.loads(web.run(urlencode([tuple(pair) for pair in out["query"]])))
    assert shown["summary"]["model"].startswith("acme/Foo-0.5B: 494,032,768 parameters")


# ---- Training time as hours or as tokens


def _cost(**inputs):
    values = parse({"gpus": "64", **inputs})
    result = estimate_values(values)
    return answer(values, result)["cost"], result


def test_hours_give_the_tokens_from_the_throughput():
    cost, result = _cost(train_hours="72")
    gpu = catalog.gpus()["h100-sxm-80gb"]
    # tokens = hours · 3600 · GPUs · peak FLOP/s · MFU / (6 · active params): the project's own hours formula
    # (6 FLOPs a token and parameter, Kaplan et al. 2020) solved for the tokens; bf16 at the datasheet's dense rate.
    expected = 72 * 3600 * 64 * gpu["bf16_dense_TFLOPS"] * 1e12 * 0.4 / (6 * result.params_active)
    assert cost["given"] == "train_hours" and cost["derived"] == "train_tokens"
    assert cost["hours"] == 72 and cost["train_tokens"] == round(expected)
    assert cost["cost_usd"] == pytest.approx(64 * gpu["price_usd_per_gpu_hour"] * 72)
    assert cost["formula"].startswith("tokens = hours")


def test_tokens_give_the_hours_and_the_two_directions_agree():
    by_hours, _ = _cost(train_hours="72")
    by_tokens, _ = _cost(train_tokens=str(by_hours["train_tokens"]))
    assert by_tokens["given"] == "train_tokens" and by_tokens["derived"] == "train_hours"
    assert by_tokens["hours"] == pytest.approx(72, rel=1e-9)
    assert by_tokens["cost_usd"] == pytest.approx(by_hours["cost_usd"], rel=1e-9)


def test_the_answer_says_which_was_given_and_which_derived():
    values = parse({"gpus": "64", "train_hours": "72"})
    result = estimate_values(values)
    row = next(r for r in report.display_answers(result, answer(values, result)) if r["key"] == "cost")
    assert row["text"].endswith("(train_hours 72 given; the tokens derived from the throughput)")
    assert row["text"].startswith("136.2B tokens in 3.0 days on 64 GPUs, $13,778")
    values = parse({"gpus": "64", "train_tokens": "1T"})
    result = estimate_values(values)
    row = next(r for r in report.display_answers(result, answer(values, result)) if r["key"] == "cost")
    assert row["text"].endswith("(train_tokens 1T given; the time derived from the throughput)")
    done = cli("gpus=64", "train_hours=72")
    assert done.returncode == 0 and "train_hours 72 given; the tokens derived" in done.stdout
    rows = {line.split(",")[1]: line.split(",")[2] for line in cli("gpus=64", "train_hours=72", "--csv").stdout.splitlines()
            if line.startswith("answer,")}
    assert rows["train_tokens"] == "136204146568" and rows["train_derived"] == "train_tokens" and rows["train_hours"] == "72.0"


def test_hours_without_a_rate_or_a_price_say_what_is_missing():
    cost, _ = _cost(train_hours="10", gpu="apple-m4-max-128gb")
    assert cost["hours"] == 10 and cost["train_tokens"] is None and cost["cost_usd"] is None
    assert "no published dense bf16 figure" in cost["why_not"]
    cost, _ = _cost(train_hours="10", gpu="h100-nvl-94gb")
    assert cost["train_tokens"] and cost["cost_usd"] is None and cost["why_not"] == "no price: set one"
    nothing, _ = _cost()
    assert nothing["hours"] is None and "train_tokens or train_hours" in nothing["why_not"]


def test_giving_both_names_the_fields():
    done = cli("train_tokens=1T", "train_hours=72")
    assert done.returncode == 2
    assert "train_hours: give train_tokens or train_hours, not both" in done.stderr
    with pytest.raises(FieldError, match="give train_tokens or train_hours, not both"):
        parse({"train_hours": "72", "train_tokens": "1T"})
    # The page: the later one is refused under its own key, every other input kept.
    payload = json.loads(web.run("train_tokens=1T&batch=2&train_hours=72"))
    assert payload["errors"]["train_hours"] == ("train_hours: give train_tokens or train_hours, not both: either gives "
                                                "the other from the throughput")
    assert ["batch", "2"] in payload["query"] and ["train_tokens", "1000000000000"] in payload["query"]
    assert "train_hours" not in dict(payload["query"])
    shown = json.loads(web.answers("train_tokens=1T&batch=2&train_hours=72"))
    assert shown["answers"]["cost"]["given"] == "train_tokens"
    # Zero is "not given": it never conflicts.
    assert parse({"train_hours": "0", "train_tokens": "1T"})["train_tokens"] == 10**12


def test_train_hours_is_one_schema_key():
    field = BY_KEY["train_hours"]
    assert (field.kind, field.default, field.unit, field.group) == ("float", 0, "hours", "hardware")
    for bad in ("-1", "1e7", "nan", "72h", "٧٢"):
        with pytest.raises(FieldError, match="train_hours"):
            parse({"train_hours": bad})
    assert ignored({**parse({"train_hours": "72", "mode": "infer"}), "kind": "transformer"}, ["train_hours"]) == ["train_hours"]
    assert 'id="f-train_hours"' in build.field_html(field)


def test_a_comparison_times_the_same_tokens_in_each_column():
    shown = json.loads(web.answers("gpus=64&train_hours=72&compare=baseline"))
    rows = {row["key"]: row for row in shown["comparison"]["rows"]}
    # Hours given: each column trains for them, and gets through the tokens its own matmul rate allows.
    assert rows["train_hours"]["this"] == rows["train_hours"]["baseline"] == "3.0 days"
    assert rows["train_tokens"]["label"] == "Tokens in that time"
    assert rows["train_tokens"]["this"] == "136.2B" and rows["train_tokens"]["baseline"] == "9.23B"   # bf16 989, fp32 67 TFLOPS
    tokens = {row["key"]: row for row in json.loads(web.answers("gpus=64&train_tokens=1T&compare=baseline"))["comparison"]["rows"]}
    assert "train_tokens" not in tokens and tokens["train_hours"]["this"] != tokens["train_hours"]["baseline"]


# ---- The price field: the number it uses and its source


def test_the_price_field_shows_the_catalog_price_and_its_source():
    shown = json.loads(web.run(""))["field_defaults"]["price"]
    assert shown == {"placeholder": "2.99",
                     "text": "$2.99 per GPU-hour: the catalog price of the NVIDIA H100 SXM 80GB (Lambda on-demand list "
                             "price, 2025; presets/gpus.json). Type your own to change it."}
    for gpu_id, gpu in catalog.gpus().items():
        shown = json.loads(web.run(f"gpu={gpu_id}"))["field_defaults"]["price"]
        assert gpu["price_source"] in shown["text"] and gpu["name"] in shown["text"]
        if gpu["price_usd_per_gpu_hour"] is None:
            assert shown["placeholder"] == "no catalog price" and "type one" in shown["text"]
        else:
            assert float(shown["placeholder"]) == gpu["price_usd_per_gpu_hour"]


def test_a_given_price_is_said_to_be_given():
    shown = json.loads(web.run("price=2.5&gpu=a100-sxm-80gb"))["field_defaults"]["price"]
    assert shown["text"].startswith("$2.50 per GPU-hour, as given; $1.79 is the catalog price of the NVIDIA A100")
    bad = json.loads(web.run("price=lots&gpu=a10g"))
    assert "price" in bad["errors"] and bad["field_defaults"]["price"]["text"].startswith("$1.006 per GPU-hour: the catalog")


def test_the_built_form_shows_the_price_not_the_words_preset_value():
    html = build.field_html(BY_KEY["price"])
    assert 'placeholder="2.99"' in html and "preset value" not in html
    assert 'id="d-price"' in html and "Lambda on-demand list price, 2025" in html
    assert 'aria-describedby="h-price d-price e-price"' in html


def test_a_baselines_hours_replace_the_tokens_it_would_inherit():
    shown = json.loads(web.answers("train_tokens=1T&base.train_hours=72&gpus=8"))
    assert shown["errors"] == {}
    base = dict(shown["answers"]["comparison"]["baseline_query"])
    assert base["train_hours"] == "72" and "train_tokens" not in base
    assert shown["answers"]["comparison"]["baseline_cost"]["given"] == "train_hours"
    # Both given to the baseline: refused by name, as for the setup itself.
    with pytest.raises(FieldError, match="base.train_hours: give train_tokens or train_hours, not both"):
        baseline_values(parse({"compare": "baseline"}), {"train_tokens": "1T", "train_hours": "72"})
