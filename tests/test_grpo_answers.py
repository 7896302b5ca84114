"""Issue 31's answers for GRPO: the longest completion, the most completions per prompt at each completion length, and
whether a colocated vLLM engine or a vLLM server on GPUs of its own needs fewer GPUs. Each answer is checked against the
estimate it comes from; TRL's rules are huggingface/trl 1.16.0's (GRPOConfig.__post_init__, grpo_config.py L1131-1140:
the generation batch a multiple of num_generations, num_generations >= 2; trl/scripts/vllm_serve.py: tensor parallel 1,
gpu_memory_utilization 0.9 by default)."""

import json
import subprocess
import sys

import pytest

from pycore.answers import rollout_answers
from pycore.answers.answer import answer
from pycore.inputs import frameworks
from pycore.inputs.schema import parse
from pycore.memory.estimate import estimate_values, totals_only
from pycore.model.catalog import gpus
from pycore.output import web

QWEN = {"model": "qwen2.5-7b", "method": "grpo", "rollout": "vllm-colocate", "dp": "8", "zero": "3"}   # the issue's


def values_of(raw):
    return frameworks.apply(parse(raw))


def answers_of(raw):
    values = values_of(raw)
    return values, answer(values, estimate_values(values))


def total(values, **changes):
    return totals_only({**values, **changes}).total_bytes


USABLE = gpus()["h100-sxm-80gb"]["usable_bytes"]


@pytest.mark.parametrize("batch,microbatches,generations,unit", [
    (1, 1, 8, 8), (2, 1, 8, 4), (8, 1, 8, 1), (3, 2, 8, 4), (1, 4, 16, 4)])
def test_dp_steps_keep_the_generation_batch_whole_groups(batch, microbatches, generations, unit):
    values = values_of({"method": "grpo", "batch": str(batch), "microbatches": str(microbatches),
                        "num_generations": str(generations)})
    assert rollout_answers.dp_unit(values) == unit
    assert batch * unit * microbatches % generations == 0                 # the least dp TRL accepts
    assert rollout_answers.dp_unit(values_of({"batch": str(batch)})) == 1     # plain fine-tuning: any dp


def test_the_plan_offers_only_layouts_trl_would_run():
    values, found = answers_of({**QWEN, "rollout": "generate", "gpu": "a100-40gb", "num_generations": "16"})
    assert found["plan"]
    for option in found["plan"]:
        layout = {**values, **{k: int(v) if k in ("dp", "pp", "microbatches") else v
                               for k, v in option["query"].items()}}
        assert layout["batch"] * layout["dp"] * layout["microbatches"] % 16 == 0
        assert layout["pp"] == 1                # transformers' Trainer has no pipeline schedule


def test_the_longest_completion_is_where_the_estimate_stops_fitting():
    values, found = answers_of(QWEN)
    longest = found["max_completion"]
    assert longest and longest > values["max_completion_length"]
    assert total(values, max_completion_length=longest) <= USABLE < total(values, max_completion_length=longest + 1)


def test_each_completion_length_gives_the_largest_micro_batch_and_the_most_generations():
    values, found = answers_of(QWEN)
    table = found["generations"]
    assert table["prompts"] == 1                       # batch 1 × dp 8 completions in groups of 8: one prompt
    lengths = [row["completion"] for row in table["rows"]]
    assert values["max_completion_length"] in lengths and lengths == sorted(lengths)
    spread = values["dp"] * values["microbatches"]
    for row in table["rows"]:
        batch, length = row["max_batch"], row["completion"]
        assert total(values, batch=batch, max_completion_length=length) <= USABLE
        assert total(values, batch=batch + 1, max_completion_length=length) > USABLE
        most = row["max_generations"]
        assert most * table["prompts"] % spread == 0 and most * table["prompts"] // spread <= batch
        assert (most + 1) * table["prompts"] // spread > batch or (most + 1) * table["prompts"] % spread
    batches = [row["max_batch"] for row in table["rows"]]
    assert batches == sorted(batches, reverse=True)     # longer completions leave room for fewer


def test_fewer_than_two_generations_is_none():
    values = values_of({**QWEN, "batch": "4", "dp": "1", "num_generations": "4"})
    assert rollout_answers.most_generations(values, 1) is None       # 1 prompt a micro-batch of 1: TRL's least is 2
    assert rollout_answers.most_generations(values, 8) == 8
    assert rollout_answers.most_generations(values, None) is None


def test_placements_compare_a_colocated_engine_with_a_server():
    values, found = answers_of(QWEN)
    options = found["placements"]["options"]
    assert [o["gpus"] for o in options] == sorted(o["gpus"] for o in options)
    colocated = next(o for o in options if o["query"]["rollout"] == "vllm-colocate")
    server = next(o for o in options if o["query"]["rollout"] == "vllm-server")
    # colocated: 4 GPUs (dp=4, 2 micro-batches: 8 completions, one group); apart: 2 training GPUs + 1 for the server
    assert colocated["gpus"] == 4 and server["gpus"] == 3 and server["text"].startswith("3 GPUs: 2 training")
    for option in (colocated, server):
        applied = values_of({**QWEN, **option["query"]})
        assert not rollout_answers.trl_refuses(applied) and totals_only(applied).total_bytes <= USABLE
    # the server holds vLLM at 0.9 of its GPU: one request of prompt + completion fits beside a 7B model's weights
    engine = totals_only(rollout_answers.server_values(values))
    assert not engine.refused and engine.total_bytes <= USABLE


def test_a_70b_policy_splits_its_engine_or_serves_it_apart():
    values, found = answers_of({"model": "llama-3.1-70b", "method": "grpo-lora", "rollout": "vllm-server"})
    colocated, server = (next(o for o in found["placements"]["options"] if o["label"].startswith(kind))
                         for kind in ("vLLM colocated", "vLLM server"))
    # the whole 70B model on each GPU beside the policy leaves no room: the engine is split over several of them
    assert int(colocated["query"]["vllm_tensor_parallel_size"]) > 1
    applied = values_of({"model": "llama-3.1-70b", "method": "grpo-lora", **colocated["query"]})
    assert not totals_only(applied).refused and totals_only(applied).total_bytes <= USABLE
    assert totals_only({**applied, "vllm_tensor_parallel_size": 1}).total_bytes > USABLE
    assert "tp=4" in server["text"] and server["gpus"] < colocated["gpus"]
    serving = rollout_answers.server_values(values)
    for tp in (1, 2):                 # 131 GiB of bf16 weights: more than 0.9 of one or two 80 GB GPUs can hold
        assert totals_only({**serving, "tp": tp}).refused or totals_only({**serving, "tp": tp}).total_bytes > USABLE
    assert not totals_only({**serving, "tp": 4}).refused


def test_other_methods_get_no_grpo_answers():
    _, found = answers_of({"method": "dpo"})
    assert "generations" not in found and "placements" not in found


def test_the_page_and_the_table_word_them():
    display = json.loads(web.answers("model=qwen2.5-7b&method=grpo&rollout=vllm-colocate&dp=8&zero=3"))["display"]
    texts = {row["key"]: row["text"] for row in display}
    assert texts["generations"].startswith("with 1 prompt a generation batch on ")
    assert "the most num_generations for each max_completion_length: 128 tokens → " in texts["generations"]
    assert "(max_completion_length)" in texts["max_completion"]
    out = subprocess.run([sys.executable, "-m", "pycore", "model=qwen2.5-7b", "method=grpo", "rollout=vllm-colocate",
                          "dp=8", "zero=3", "--csv"], capture_output=True, text=True, check=True).stdout
    assert "answer,rollout_placement_1,\"vLLM server" in out and "answer,max_generations_at_512," in out


def test_a_colocated_engine_over_gpus_keeps_the_world_a_multiple_of_it():
    # vllm_tensor_parallel_size 8 over dp=8 × tp=1 ranks: dp in steps of 8 (trl/generation/vllm_generation.py L312-318)
    values = values_of({**QWEN, "batch": "8", "vllm_tensor_parallel_size": "8"})
    assert rollout_answers.dp_unit(values) == 8
    assert rollout_answers.dp_unit({**values, "tp": 2}) == 4
    assert rollout_answers.dp_unit({**values, "rollout": "vllm-server"}) == 1


def test_the_colocated_placement_sets_a_max_model_length_the_engine_can_hold():
    # left at None, vllm_max_model_length is Qwen2.5-7B's 131,072 positions: the placement sets prompt + completion
    values, found = answers_of({**QWEN, "vllm_gpu_memory_utilization": "0.2"})
    assert totals_only(values).refused                       # as typed, the engine would not start
    colocated = next(o for o in found["placements"]["options"] if o["label"].startswith("vLLM colocated"))
    assert colocated["query"]["vllm_max_model_length"] == str(2048 + 512)
    applied = values_of({**QWEN, "vllm_gpu_memory_utilization": "0.2", **colocated["query"]})
    assert not totals_only(applied).refused and totals_only(applied).total_bytes <= USABLE


def test_an_engine_that_would_not_start_is_given_the_changes_that_start_it():
    # at 0.2 of an H100 the engine cannot hold one request of Qwen2.5-7B's 131,072 positions (tests/test_grpo.py)
    values, found = answers_of({**QWEN, "vllm_gpu_memory_utilization": "0.2"})
    assert not found["fits"]
    fixes = {fix["change"]: fix for fix in found["how_to_fit"]}
    capped = fixes["vllm_max_model_length=2560"]
    assert capped["fits"] and capped["total_bytes"] == totals_only({**values, "vllm_max_model_length": 2560}).total_bytes
    assert fixes["vllm_gpu_memory_utilization=0.3"]["fits"]
    assert rollout_answers.rollout_changes(values_of({"method": "dpo"})) == []


def test_whole_groups_from_more_micro_batches_on_fewer_gpus():
    # GRPOConfig fills a group of 8 with batch 1 × dp 2 × 4 micro-batches as well as with dp 8
    # (steps_per_generation follows gradient_accumulation_steps, grpo_config.py L1097-1100)
    values, found = answers_of({"model": "qwen2.5-7b", "method": "grpo"})
    best = found["plan"][0]
    assert best["label"].startswith("zero=3 dp=2 microbatches=4") and found["gpus_needed"] == 2
    applied = values_of({"model": "qwen2.5-7b", "method": "grpo", **best["query"]})
    assert not rollout_answers.trl_refuses(applied) and totals_only(applied).total_bytes <= USABLE
    assert totals_only({**applied, "dp": 1, "microbatches": 8}).total_bytes > USABLE     # one GPU: too little


def test_generations_are_answered_at_the_first_layout_that_fits_when_the_given_one_does_not():
    # one H100 holds no GRPO step of Qwen2.5-7B with its engine: the rows are those of the plan's first layout
    values, found = answers_of({"model": "qwen2.5-7b", "method": "grpo", "rollout": "vllm-colocate"})
    assert not found["fits"] and found["generations"]["layout"] == found["plan"][0]["label"]
    best = values_of({"model": "qwen2.5-7b", "method": "grpo", "rollout": "vllm-colocate", **found["plan"][0]["query"]})
    row = next(r for r in found["generations"]["rows"] if r["completion"] == 512)
    assert total(best, batch=row["max_batch"]) <= USABLE < total(best, batch=row["max_batch"] + 1)
