"""Say the default (issue #27, part 3): training at precision=auto with the Hugging Face Trainer loads a bf16
checkpoint in bf16 and keeps AdamW's states in bf16 (about 8 bytes of model states a parameter), where most
engineers expect fp32 master weights (16). The page and the CLI say so in one sentence, with what
precision=bf16-master would cost, re-estimated by pycore."""

import json
import subprocess
import sys
from pathlib import Path

from pycore.base.units import format_bytes
from pycore.memory.estimate import estimate
from pycore.output import web

ROOT = Path(__file__).resolve().parent.parent


def test_the_default_is_said_with_what_master_weights_cost():
    note = json.loads(web.answers("model=llama-3.1-8b"))["answers"]["precision_default"]
    default, master = estimate({"model": "llama-3.1-8b"}), estimate({"model": "llama-3.1-8b", "precision": "bf16-master"})
    assert default.setup.precision == "bf16"
    assert note["query"] == {"precision": "bf16-master"} and note["change"] == "precision=bf16-master"
    assert note["total_bytes"] == master.total_bytes
    assert note["difference_bytes"] == master.total_bytes - default.total_bytes > 0
    # bf16 weights + bf16 gradients + 2 bf16 AdamW states = 8 bytes; bf16-master: 2 + 2 + 4 + 2 × 4 = 16.
    assert "pure bf16" in note["text"] and "8 bytes of model states per parameter" in note["text"]
    assert "16 bytes of model states per parameter" in note["text"]
    assert format_bytes(note["difference_bytes"])["text"] + " more" in note["text"]


def test_only_where_the_default_is_pure_16_bit():
    for query in ("model=llama-3.1-8b&precision=bf16", "model=llama-3.1-8b&mode=infer", "model=gpt2",
                  "model=llama-3.1-8b&framework=pytorch"):
        assert json.loads(web.answers(query))["answers"]["precision_default"] is None, query


def test_the_command_line_says_it():
    done = subprocess.run([sys.executable, "-m", "pycore", "model=llama-3.1-8b"], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    note = json.loads(web.answers("model=llama-3.1-8b"))["answers"]["precision_default"]
    assert note["text"] in done.stdout


def test_the_inputs_doc_says_what_the_output_does():
    text = (ROOT / "docs" / "inputs.md").read_text()
    assert "bf16=True (fp32 weights under autocast)" not in text
    assert "pure bf16 for a bf16 checkpoint" in text
