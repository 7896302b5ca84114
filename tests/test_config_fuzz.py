"""Property tests: config import never raises, always answers with a query or one error, and answers fast.

Random and adversarial inputs (hypothesis): arbitrary text, arbitrary JSON, published configs with one field
replaced by a hostile value, and deep or long nesting. Each test is bounded by ``max_examples`` (named in its
settings; ``pytest --hypothesis-show-statistics`` prints how many ran) and every call by ``SECONDS``.
"""

import json
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pycore import estimate
from pycore.model.config_import import import_config

CONFIGS = sorted((Path(__file__).resolve().parent / "configs").glob("*.json"))
PUBLISHED = [json.loads(path.read_text()) for path in CONFIGS]
FIELDS = sorted({key for config in PUBLISHED for key in config} | {"text_config", "num_kv_heads", "n_head"})
SECONDS = 2.0                   # one import must answer within this, even for 2 MB of garbage (the page waits on it)
FUZZ = settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = st.none() | st.booleans() | st.integers(min_value=-10**30, max_value=10**30) | \
    st.floats(allow_nan=False) | st.text(max_size=30)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=5) |
                           st.dictionaries(st.text(max_size=10), inner, max_size=5), max_leaves=30)
hostile = st.sampled_from([0, -1, 1e400, -1e400, 10**9, 10**20, "32", "", [], {}, [32], True, False, None, 2.5,
                           float("1e308"), "llama", {"model_type": "llama"}, "\u0000", "<script>"])


def check(text):
    """One import: a dict with exactly 'query' (and params, message, warnings) or 'error', within SECONDS."""
    start = time.perf_counter()
    answer = import_config(text)
    elapsed = time.perf_counter() - start
    assert elapsed < SECONDS, f"took {elapsed:.2f} s"
    assert isinstance(answer, dict)
    if "error" in answer:
        assert set(answer) == {"error"}
        assert isinstance(answer["error"], str) and answer["error"].startswith("config.json")
        assert len(answer["error"]) < 1000 and "Traceback" not in answer["error"]
    else:
        assert set(answer) - {"carried"} == {"query", "params", "message", "warnings"}
        assert answer["query"][0][0] == "model" and isinstance(answer["params"], int) and answer["params"] > 0
        assert all(isinstance(key, str) and isinstance(value, str) for key, value in answer["query"])
        if answer.get("carried"):       # the link carries the config's text: the schema reads it back, same count
            assert estimate({"seq": "512", **dict(answer["query"])}).params_total == answer["params"]
    json.dumps(answer)                                  # the page receives it as JSON
    return answer


@FUZZ
@given(st.text(max_size=200))
def test_any_text(text):
    check(text)


@FUZZ
@given(json_values)
def test_any_json(value):
    check(json.dumps(value))


@FUZZ
@given(st.sampled_from(PUBLISHED), st.sampled_from(FIELDS), hostile)
def test_a_published_config_with_one_hostile_field(config, field, value):
    check(json.dumps({**config, field: value}, allow_nan=True))


@FUZZ
@given(st.sampled_from(PUBLISHED), st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=4))
def test_a_published_config_with_random_fields(config, changes):
    check(json.dumps({**config, **changes}))


@settings(max_examples=30, deadline=None, database=None)
@given(st.integers(min_value=1, max_value=200_000), st.sampled_from(["[", "{\"a\":", "[{\"b\":"]))
def test_deep_nesting_never_recurses_too_far(depth, opener):
    check(opener * depth)


@settings(max_examples=10, deadline=None, database=None)
@given(st.integers(min_value=1_900_000, max_value=2_100_000), st.sampled_from(["[", "x", "\"", "1"]))
def test_large_inputs_are_bounded(size, filler):
    check(filler * size)
