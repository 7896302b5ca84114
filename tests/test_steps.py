"""The answers run in steps (pycore/base/steps.py): the page makes them a few at a time between keystrokes
(site/main.py answers_slice), checking the clock and waiting input between steps, so a step must stay
small and stepping must give the very answers a single call gives."""

import importlib

import pytest

from pycore.output import web

estimate_module = importlib.import_module("pycore.memory.estimate")     # the package's name "estimate" is the function

QUERIES = [
    "model=llama-3.1-70b&precision=bf16&fsdp=FULL_SHARD&dp=8&recompute=full&batch=3",   # the 70B FSDP case
    "",
    "model=llama-3.1-8b&mode=infer&seq=8192&batch=16",
    "model=llama-3.1-8b&mode=infer&engine=vllm",
    "model=qwen2.5-0.5b&compare=baseline&base.batch=4",
    "model=llama-3.1-8b&method=qlora",
    "model=resnet-50",
    "model=no-such-model",
]


@pytest.fixture
def counted(monkeypatch):
    """Every estimate made, counted (the totals' cache emptied first, so each search estimates afresh)."""
    calls = []
    real = estimate_module.estimate_setup

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(estimate_module, "estimate_setup", counting)
    estimate_module._totals_only.cache_clear()
    return calls


@pytest.mark.parametrize("query", QUERIES)
def test_each_step_makes_one_estimate_at_most_and_stepping_gives_the_same_answers(query, counted):
    steps = web.answers_steps(query)
    per_step = []
    while True:
        before = len(counted)
        try:
            next(steps)
        except StopIteration as done:
            stepped = done.value
            per_step.append(len(counted) - before)
            break
        per_step.append(len(counted) - before)
    assert max(per_step) <= 1, per_step
    assert stepped == web.answers(query)
    if query.startswith("model=llama-3.1-70b"):
        assert sum(per_step) >= 20              # the searches: a few dozen estimates, one a step


def test_steps_left_unfinished_change_no_later_answers(counted):
    # A keystroke drops the steps begun for the previous one: what they did must not show in the next.
    later = "model=llama-3.1-70b&precision=bf16&fsdp=FULL_SHARD&dp=8&recompute=full&batch=5"
    expected = web.answers(later)
    estimate_module._totals_only.cache_clear()
    dropped = web.answers_steps(QUERIES[0])
    for _ in range(25):
        next(dropped)
    del dropped
    assert web.answers(later) == expected
