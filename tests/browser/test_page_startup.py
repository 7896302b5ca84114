"""The page says what the estimate cannot vouch for beside the total: vLLM refusing to start, a sequence past
a learned position table (issue 27)."""

import json

import pytest
from conftest import seen_text, show

from pycore.output import web

pytestmark = pytest.mark.browser

REFUSED = "model=llama-3.1-70b&mode=infer&engine=vllm&tp=2&seq=32768"


def test_vllm_refusal_is_the_verdict_and_stands_by_the_total(shared):
    page = shared.page
    show(page, REFUSED)
    expected = json.loads(web.run(REFUSED))
    chosen = next(g for g in expected["gpus"] if g["chosen"])
    assert page.inner_text("#total-badge") == chosen["verdict"]
    assert page.get_attribute("#total-badge", "class") == "badge no"
    warning = seen_text(page.locator("#warnings-line"))
    assert warning.startswith("vLLM would refuse to start") and warning == " ".join(expected["warnings"])


def test_a_sequence_past_learned_positions_is_refused_by_name_and_the_model_kept(shared):
    page = shared.page
    show(page, "model=gpt2&seq=2048")
    message = page.inner_text("#e-seq")
    assert "1,024 learned positions" in message and message.endswith("estimated at 1,024")   # not "the default"
    assert page.input_value("[data-key='model']") == "gpt2"
    show(page, "model=llama-3.1-8b&seq=4096")
    assert page.is_hidden("#warnings-line")
