"""A review of the GRPO answers and the colocated engine (issue 31), each defect found kept as a test: layouts and
changes TRL 1.16 would refuse are not offered, what vLLM refuses is named, and the answers' words say what they
mean. TRL's rules: grpo_config.py L1068-1076 (no context parallelism), L1131-1140 (the generation batch in whole
groups), L664-670 (vllm_max_model_length at least prompt + completion); vllm_generation.py L312-318 (the engine's
GPUs divide the processes); vLLM: the heads divisible by the tensor-parallel degree, and max_num_seqs at most
max_num_batched_tokens (vllm/config/scheduler.py)."""

import pytest

from pycore import estimate
from pycore.answers import rollout_answers
from pycore.answers.answer import answer
from pycore.base.errors import FieldError
from pycore.inputs import frameworks
from pycore.inputs.schema import parse
from pycore.memory import rollout
from pycore.memory.estimate import estimate_values
from pycore.memory.setup import resolve

QWEN = {"model": "qwen2.5-7b", "method": "grpo", "rollout": "vllm-colocate"}


def answers_of(raw):
    values = frameworks.apply(parse(raw))
    return values, answer(values, estimate_values(values))


@pytest.mark.parametrize("raw", [
    {**QWEN, "method": "grpo-lora", "batch": "8", "vllm_tensor_parallel_size": "2"},   # 2 engine GPUs, 1 process
    {"model": "qwen2.5-7b", "method": "grpo", "num_generations": "16"},               # 1 completion, groups of 16
])
def test_a_layout_trl_refuses_is_not_offered_as_given(raw):
    values, found = answers_of(raw)
    assert rollout_answers.trl_refuses(values)
    assert all(option["label"] != "as given" for option in found["plan"])
    for fix in found["how_to_fit"]:
        assert not rollout_answers.trl_refuses({**values, **{k: type(values[k])(v) if isinstance(values[k], int)
                                                              else v for k, v in fix["query"].items()}})


def test_zero3_over_gpus_keeps_whole_groups():
    _, found = answers_of({"model": "qwen2.5-7b", "method": "grpo", "num_generations": "16", "gpu": "a100-sxm-80gb"})
    labels = [fix["change"] for fix in found["how_to_fit"]]
    assert "zero=3 over 8 GPUs" not in labels          # 8 completions cannot hold a group of 16


def test_serving_is_not_said_to_be_capped_when_memory_binds():
    # regression: a memory-bound longest sequence was called capped at the model's positions
    _, found = answers_of({"model": "llama-3.1-8b", "mode": "infer", "batch": "8", "gpu": "rtx-4090"})
    assert found["max_seq"] < 131072
    assert not any("capped" in note for note in found["notes"])


def test_the_engines_gpus_must_split_the_heads_and_trl_runs_no_context_parallelism():
    with pytest.raises(FieldError) as raised:
        estimate({**QWEN, "dp": "3", "batch": "8", "vllm_tensor_parallel_size": "3"})   # 28 heads, 4 KV heads
    assert raised.value.key == "vllm_tensor_parallel_size"
    with pytest.raises(FieldError) as raised:
        estimate({**QWEN, "cp": "2", "dp": "4", "batch": "2", "zero": "3"})
    assert raised.value.key == "cp" and "context parallelism" in raised.value.message


def test_a_max_model_length_under_prompt_and_completion_is_named():
    result = estimate({**QWEN, "vllm_max_model_length": "100"})
    assert any("vllm_max_model_length = 100 is under the prompt and completion, 2,560 tokens" in w
               for w in result.warnings)
    values, found = answers_of({**QWEN, "batch": "8", "vllm_max_model_length": "100"})
    assert rollout_answers.trl_refuses(values)
    assert all(option["label"] != "as given" for option in found["plan"])


def test_distillation_is_held_to_the_engines_gpu_rule_too():
    result = estimate({"model": "qwen2.5-7b", "method": "distill-lora", "rollout": "vllm-colocate",
                       "vllm_tensor_parallel_size": "2", "batch": "8"})
    assert any("vllm_tensor_parallel_size = 2 must divide the 1 training processes" in w for w in result.warnings)
    values = frameworks.apply(parse({"model": "qwen2.5-7b", "method": "distill-lora", "rollout": "vllm-colocate",
                                     "vllm_tensor_parallel_size": "2", "batch": "8"}))
    assert rollout_answers.dp_unit(values) == 2


def test_more_sequences_a_step_than_tokens_is_refused():
    served = estimate({"model": "llama-3.1-8b", "mode": "infer", "engine": "vllm", "max_num_seqs": "10000"})
    assert "max_num_batched_tokens (8,192) must be greater than or equal to max_num_seqs (10,000)" in served.refused
    # TRL fixes max_num_batched_tokens at 4,096: 2,049 completions × 2 micro-batches is more rows than that
    rollout = estimate({"model": "llama-3.2-1b", "method": "grpo-lora", "rollout": "vllm-colocate", "seq": "64",
                        "max_completion_length": "64", "batch": "2049", "microbatches": "2", "num_generations": "2"})
    assert "must be greater than or equal to max_num_seqs (4,098)" in rollout.refused


def test_the_engine_split_multiplies_trls_max_num_seqs():
    # max_num_seqs = batch × vllm_tensor_parallel_size × steps_per_generation (grpo_trainer.py L1124-1126)
    for tp, rows in (("1", 8 * 3), ("2", 8 * 2 * 3)):
        setup = resolve(parse({**QWEN, "batch": "8", "dp": "2", "microbatches": "3", "vllm_tensor_parallel_size": tp}))
        engine = rollout._engine_setup(setup)
        assert engine.workload.max_num_seqs == engine.workload.batch == rows
        assert engine.layout.tp == int(tp)


def test_a_prompt_that_fills_the_positions_leaves_no_completion():
    _, found = answers_of({"model": "llama-3.2-1b", "method": "grpo-lora", "seq": "131072", "gpu": "h200-141gb"})
    assert found["max_completion"] is None and found["generations"]["rows"] == []


def test_changes_on_these_gpus_come_before_a_server_and_the_engine_split_is_one():
    _, found = answers_of({**QWEN, "dp": "8", "zero": "3", "vllm_gpu_memory_utilization": "0.2"})
    fitting = [fix["change"] for fix in found["how_to_fit"] if fix["fits"]]
    assert fitting[-1] == rollout_answers.SERVER_CHANGE
    assert "vllm_tensor_parallel_size=2" in fitting
