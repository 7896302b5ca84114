"""CONTRACT.md is generated from the Estimate record and stays current; the payloads hold the keys it names."""

import dataclasses
import json
import sys
from pathlib import Path

from pycore import estimate, parse
from pycore.memory.estimate import estimate_values, totals_only
from pycore.memory.record import Estimate
from pycore.output import report, web

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import contract  # noqa: E402


def test_contract_md_is_current():
    assert (ROOT / "CONTRACT.md").read_text(encoding="utf-8") == contract.markdown(), "run python tools/contract.py"


def test_every_record_field_is_explained():
    for name, hint, meaning in contract._fields(Estimate):
        assert meaning, f"Estimate.{name} has no comment in pycore/memory/record.py"


def test_the_payloads_hold_the_keys_the_contract_names():
    run = json.loads(web.run("model=llama-3.1-8b&pp=2&dp=2"))
    assert set(run) == set(contract.ENTRY_POINTS["web.run(query)"])
    assert set(json.loads(web.headline("model=llama-3.1-8b"))) == set(contract.ENTRY_POINTS["web.headline(query)"])
    assert set(json.loads(web.answers("model=llama-3.1-8b"))) == set(contract.ENTRY_POINTS["web.answers(query)"])
    fields = {f.name for f in dataclasses.fields(Estimate)} - {"params_total", "params_active"}
    assert set(run["result"]) == fields | {"params", "components"}
    assert set(run["summary"]) == {"peak", "model", "views", "layout"}


def test_one_shape_whatever_is_asked():
    # The searches' totals-only estimate is the same record, with the same totals, as the explained one.
    values = parse({"model": "llama-3.1-8b", "pp": "2", "dp": "2"})
    full, totals = estimate_values(values), totals_only(values)
    assert type(full) is type(totals) is Estimate
    for name in ("peak_bytes", "reserved_bytes", "total_bytes", "moments", "layout"):
        assert getattr(full, name) == getattr(totals, name), name
    assert [(p.key, p.bytes) for p in full.breakdown] == [(p.key, p.bytes) for p in totals.breakdown]
    assert full.stages and not totals.stages     # every stage's summary is for explanations only


def test_the_layout_is_the_one_estimated():
    # Issue 26: dp=8 ep=8 spans 8 GPUs (experts split inside dp), not dp × ep = 64.
    result = estimate({"model": "mixtral-8x7b-v0.1", "dp": "8", "ep": "8"})
    assert result.layout.gpus == 8
    assert report.summary(result)["layout"] == "8 GPUs: dp 8, experts split 8 ways within dp × cp"
    # A refused tp falls back to its default: the summary says the layout estimated, not the one typed.
    payload = json.loads(web.run("model=llama-3.1-8b&tp=12"))
    assert "tp" in payload["errors"] and payload["summary"]["layout"] == "1 GPU"
