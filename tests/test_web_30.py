"""Issue 30's page entry points (pycore/output/web.py): launch settings out and back, calibration. The page shows
these payloads as they are (tests/browser/test_page_checkpoint_30.py); here, what they hold."""

import json
import sys
from pathlib import Path
from urllib.parse import urlencode

import pytest

from pycore.inputs.schema import BY_KEY
from pycore.output import export, web

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tools"))
import contract  # noqa: E402
from test_calibrate import VLLM_TABLE_H100, VLLM_V1_A100  # noqa: E402


def total(query):
    return json.loads(web.run(query))["total"]["bytes"]


def test_the_payloads_hold_the_keys_the_contract_names():
    assert set(json.loads(web.launch(""))) == set(contract.ENTRY_POINTS["web.launch(query)"])
    read = contract.ENTRY_POINTS["web.launch_read(text)"]
    assert set(json.loads(web.launch_read('{"per_device_train_batch_size": 2}'))) == set(read) - {"error"}
    calibrated = contract.ENTRY_POINTS["web.calibration(text, query)"]
    assert set(json.loads(web.calibration("max_memory_allocated: 30000000000\n", ""))) == set(calibrated) - {"error"}
    assert set(json.loads(web.calibration("nothing", ""))) == {"error"}


@pytest.mark.parametrize("query,kinds", [
    ("", ["trainer", "deepspeed"]),
    ("mode=infer&engine=vllm&tp=2", ["vllm"]),
    ("mode=infer", []),
])
def test_launch_gives_the_blocks_of_the_mode_with_the_version_they_follow(query, kinds):
    payload = json.loads(web.launch(query))
    assert [block["kind"] for block in payload["blocks"]] == kinds
    for block in payload["blocks"]:
        assert block["follows"] == "Names as in " + export.FOLLOWS[block["kind"]][1]
        assert block["title"] == export.FOLLOWS[block["kind"]][0]
    assert bool(payload["note"]) == (not kinds)


@pytest.mark.parametrize("query", [
    "model=llama-3.1-70b&mode=infer&engine=vllm&tp=4&seq=8192&new_tokens=512&kv_dtype=fp8",
    "model=llama-3.1-8b&batch=4&microbatches=8&recompute=full",
])
def test_each_block_read_back_gives_the_same_estimate(query):
    blocks = json.loads(web.launch(query))["blocks"]
    for block in blocks:
        taken = json.loads(web.launch_read(block["text"]))["set"]
        # the page sets the pasted settings over the inputs in the form: here, the query's
        merged = dict(pair.split("=") for pair in query.split("&")) | dict(taken)
        assert total(urlencode(merged)) == total(query), block["kind"]


def test_pasted_settings_list_what_no_input_takes_and_refuse_values_by_key():
    pasted = json.dumps({"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 4,
                         "zero_optimization": {"stage": 2, "contiguous_gradients": True}, "steps_per_print": 10})
    answer = json.loads(web.launch_read(pasted))
    assert dict(answer["set"]) == {"mode": "train", "microbatches": "4", "zero": "2", "offload": "none"}
    assert "Refused: batch: got 'auto'" in answer["message"]
    assert "zero_optimization.contiguous_gradients" in answer["message"] and "steps_per_print" in answer["message"]
    line = json.loads(web.launch_read("vllm serve org/model --max-model-len=4096 --enforce-eager --seed 1"))
    assert ["seq", "4096"] in line["set"]            # --flag=value is read as argparse reads it
    assert "Not read (no input of this estimator takes them): --enforce-eager, --seed." in line["message"]


@pytest.mark.parametrize("text", ["", "hello", "[1, 2]", "[" * 50_000, "vllm serve 'unclosed", "{" + " " * 300_000 + "}",
                                  '{"a": NaN}'])
def test_bad_pasted_settings_are_a_message(text):
    answer = json.loads(web.launch_read(text))
    assert answer.get("error", "").startswith("Pasted settings: ") or set(answer) == {"set", "message"}


def test_calibration_payload_is_calibrates_own_words():
    query = urlencode({"model": "llama-3.1-8b", "mode": "infer", "engine": "vllm", "gpu": "a100-40gb",
                       "seq": "131071", "new_tokens": "1"})
    answer = json.loads(web.calibration(VLLM_V1_A100, query))
    assert answer["overrides"] == [] and answer["apply_note"].startswith("No override")
    assert answer["display"]["rows"][0]["label"] == "Weights" and answer["display"]["rows"][0]["measured"] == "14.99 GiB"
    smi = "| N/A   30C    P0   120W / 700W |  74100MiB / 81559MiB |     0%      Default |\n"
    answer = json.loads(web.calibration(VLLM_TABLE_H100 + smi, "model=llama-3-8b&mode=infer&engine=vllm&gpu_util=0.95"))
    assert dict(answer["overrides"]) == {"gpu_util": "0.9", "overhead": str(74100 * 2**20 - round(71.29 * 2**30))}
    assert answer["apply_note"].startswith("Apply sets gpu_util, overhead in the form and the link")


def test_calibration_without_figures_says_so():
    assert "no figure recognised" in json.loads(web.calibration("<b>x</b>", ""))["error"]


# --- a checkpoint's headers read by the page ------------------------------------------------------------------

from test_checkpoint import GGUF_METADATA, GGUF_TENSORS, gguf_bytes, llama, safetensors_bytes, shards  # noqa: E402

from pycore.model.checkpoint import read_path  # noqa: E402


def page_reads(paths):
    """What the page does: each file sliced from its start to the lengths web.header_need asks for; the files'
    (name, size, bytes read) and the most bytes read of each."""
    files, most = [], {}
    for path in paths:
        data, read = Path(path).read_bytes(), b""
        for _ in range(64):
            need = web.header_need(Path(path).name, len(data), read)
            if not need or need <= len(read):
                break
            read = data[:need]
        files.append((Path(path).name, len(data), read))
        most[Path(path).name] = len(read)
    return files, most


def test_the_page_reads_a_sharded_checkpoint_as_the_command_line_does(tmp_path):
    index, names = shards(tmp_path)
    files, most = page_reads([index, *(tmp_path / name for name in names)])
    answer = json.loads(web.header_summary(files))
    found = read_path(index)
    assert dict(answer["set"]) == {"weight_bytes": str(found.total_bytes),
                                   "weight_files": f"2 files, {names[0]} ... {names[1]}"}
    # only the 8 bytes and the JSON of each shard were read (the index is its JSON)
    for name in names:
        data = (tmp_path / name).read_bytes()
        assert most[name] == 8 + int.from_bytes(data[:8], "little") < len(data)
    assert answer["rows"][0] == {"label": "embedding", "bytes": f"{found.by_pool['embedding']:,}",
                                 "text": f"{found.by_pool['embedding'] / 2**30:,.3f} GiB"}


def test_the_page_reads_a_gguf_file_in_growing_slices(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(gguf_bytes(GGUF_METADATA, GGUF_TENSORS))
    files, most = page_reads([path])
    answer = json.loads(web.header_summary(files))
    assert dict(answer["set"])["weight_bytes"] == str(read_path(str(path)).total_bytes)
    assert most["model.gguf"] <= path.stat().st_size


@pytest.mark.parametrize("files,word", [
    ([("a.safetensors", 100, b"\xff" * 8)], "a.safetensors"),
    ([("model.safetensors.index.json", 2, b"{}")], "weight_map"),
    ([("notes.txt", 3, b"abc")], "no .safetensors"),
    ([], "no .safetensors"),
])
def test_a_refused_checkpoint_is_a_message_naming_what_is_wrong(files, word):
    assert word in json.loads(web.header_summary(files))["error"]


def test_a_shard_not_chosen_with_its_index_is_named(tmp_path):
    index, names = shards(tmp_path)
    files, _ = page_reads([index, tmp_path / names[0]])
    assert f"the index names '{names[1]}', which was not chosen with it" in json.loads(web.header_summary(files))["error"]


def test_weight_bytes_replace_the_weights_estimate_and_say_where_they_come_from(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(safetensors_bytes(llama()))
    weights = read_path(str(path)).total_bytes
    for query, share in (("", 1), ("tp=2&mode=infer", 2)):
        payload = json.loads(web.run(f"model=llama-3.1-8b&weight_bytes={weights}&weight_files=model.safetensors&{query}"))
        row = next(f for f in payload["formulas"] if f["key"] == "weights")
        assert row["source"].startswith("from the checkpoint's headers (model.safetensors): W = ")
        if share == 1:
            assert row["bytes"] == weights and row["formula"] == "W"
        else:                                   # this GPU's share S / P of the checkpoint's bytes
            assert row["formula"] == "round(W × S / P)"
    plain = json.loads(web.run("model=llama-3.1-8b"))
    assert "checkpoint" not in next(f for f in plain["formulas"] if f["key"] == "weights")["source"]


def test_the_hubs_index_names_the_shards_and_a_bad_one_is_named():
    index = json.dumps({"weight_map": {"a": "m-1.safetensors", "b": "m-2.safetensors", "c": "m-1.safetensors"}})
    assert json.loads(web.header_shards(index.encode())) == {"shards": ["m-1.safetensors", "m-2.safetensors"]}
    bad = json.loads(web.header_shards(json.dumps({"weight_map": {"a": "../x"}}).encode()))["error"]
    assert bad.startswith("Checkpoint: model.safetensors.index.json: the index maps 'a' to '../x'")


def test_a_hub_file_of_unknown_size_is_read_and_named_by_its_repository(tmp_path):
    # the hub's first range answer may come without Content-Range: the size is then not known (-1) nor checked
    path = tmp_path / "model.safetensors"
    path.write_bytes(safetensors_bytes(llama()))
    data, read = path.read_bytes(), b""
    while need := web.header_need("model.safetensors", -1, read):
        read = data[:need]
    assert len(read) == 8 + int.from_bytes(data[:8], "little")
    answer = json.loads(web.header_summary([("model.safetensors", -1, read)], "acme/tiny"))
    assert dict(answer["set"]) == {"weight_bytes": str(read_path(str(path)).total_bytes),
                                   "weight_files": "acme/tiny: model.safetensors"}


def test_what_fits_estimates_every_other_preset_from_its_own_parameters():
    plain = {row["id"]: row["total_bytes"] for row in json.loads(web.fits("gpu=h100-sxm-80gb&gpus=8"))["rows"]}
    read = {row["id"]: row["total_bytes"] for row in
            json.loads(web.fits("gpu=h100-sxm-80gb&gpus=8&weight_bytes=1000&weight_files=x.safetensors"))["rows"]}
    assert read == plain


# --- fuzz: truncated, oversized and malformed headers and pasted text never raise, hang or lose the inputs --------

from fuzz_counts import count_fuzz  # noqa: E402
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

GOOD = safetensors_bytes(llama())


def _prefix_and_noise(data):
    """A real header cut anywhere, with bytes changed or appended: truncated and malformed headers alike."""
    return st.tuples(st.integers(0, len(data)), st.binary(max_size=64), st.integers(0, len(data))).map(
        lambda t: data[:t[0]] + t[1] + data[t[0] + len(t[1]):t[2]] if t[2] > t[0] else data[:t[0]] + t[1])


@settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=200), _prefix_and_noise(GOOD), _prefix_and_noise(gguf_bytes(GGUF_METADATA,
                                                                                                 GGUF_TENSORS))),
       st.sampled_from(["model.safetensors", "model.gguf", "model.safetensors.index.json"]),
       st.integers(-1, 2**40))
@example(data=b"GGUF\x03\x00\x00\x00", name="model.safetensors", size=8)      # hypothesis found: asked for 8 again
def test_any_header_bytes_give_a_length_or_a_message(data, name, size):
    count_fuzz("web.header_need / header_summary")
    reads = 0
    read = b""
    while (need := web.header_need(name, size, read)) and reads < 64:
        assert need > len(read)                      # every read asks for more: the page's loop ends
        read = data[:need]
        reads += 1
        if len(read) < need:                         # the file (here, the data) ends first
            break
    answer = json.loads(web.header_summary([(name, size, read)]))
    assert set(answer) == {"error"} or set(answer) == {"rows", "message", "notes", "set"}
    if "error" in answer:
        assert answer["error"].startswith("Checkpoint: ") and answer["error"].isprintable()


@settings(max_examples=200, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=300), st.builds(lambda w: "vllm serve " + " ".join(w), st.lists(st.text(max_size=12),
                                                                                                   max_size=8)),
                 st.builds(json.dumps, st.dictionaries(st.text(max_size=30), st.one_of(
                     st.integers(), st.text(max_size=10), st.booleans(), st.none()), max_size=6))))
def test_any_pasted_launch_settings_give_settings_or_a_message(text):
    count_fuzz("web.launch_read")
    answer = json.loads(web.launch_read(text))
    assert set(answer) in ({"error"}, {"set", "message"})
    for key, _ in answer.get("set", []):
        assert key in BY_KEY
