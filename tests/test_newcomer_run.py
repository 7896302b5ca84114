"""A newcomer's run-through of the page and the command line: a layout's label names every degree of its GPU
count, the text tables keep their columns and never cut a label, notes are told from warnings, and the ZeRO
field says what an FSDP strategy sets."""

import math
import re

import pytest

from pycore import parse
from pycore.answers.answer import answer
from pycore.memory.estimate import estimate_values

TORCHTITAN_TP8 = {"framework": "torchtitan", "model": "llama-3.1-70b", "dp": "8", "tp": "8", "fsdp": "FULL_SHARD"}


def _plan(query):
    values = parse(query)
    return answer(values, estimate_values(values))["plan"]


def _degrees(label):
    return {key: int(n) for key, n in re.findall(r"\b(dp|tp|pp|cp)=(\d+)", label)}


@pytest.mark.parametrize("query", [TORCHTITAN_TP8, {"model": "llama-3.1-70b", "tp": "8"},
                                   {"model": "llama-3.1-70b", "dp": "4", "pp": "2", "microbatches": "2"}])
def test_a_layouts_label_names_every_degree_its_gpus_multiply(query):
    # The chip said "zero=3 dp=2 → 16 GPUs" with tp=8 kept from the inputs: 16 could not be worked out from it.
    plan = [o for o in _plan(query) if o["label"] != "as given"]
    assert plan
    for option in plan:
        assert math.prod(_degrees(option["label"]).values()) == option["gpus"], option["label"]


def test_a_kept_degree_is_said_to_be_kept():
    labels = [o["label"] for o in _plan(TORCHTITAN_TP8)]
    assert "zero=3 dp=2, tp=8 kept" in labels
