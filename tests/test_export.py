"""Launch settings out and back (pycore/output/export.py): each block, pasted back, gives the same estimate.

Flag and key names: vLLM 0.11 EngineArgs (vllm/engine/arg_utils.py: --tensor-parallel-size, --max-model-len,
--gpu-memory-utilization, --max-num-batched-tokens, --kv-cache-dtype, --quantization, --enable-expert-parallel,
--speculative-config); transformers 5.24 TrainingArguments (per_device_train_batch_size, gradient_accumulation_steps,
gradient_checkpointing, bf16, optim with OptimizerNames' "adamw_torch_fused", fsdp with FSDPOption's "full_shard");
DeepSpeed's config keys (train_micro_batch_size_per_gpu, zero_optimization.stage, offload_optimizer.device).
"""

import json
import shlex

import pytest

from pycore import estimate
from pycore.inputs.schema import InputError, parse
from pycore.memory.estimate import estimate_values
from pycore.output import export


def _round_trip(kind, query):
    values = parse(query)
    result = estimate_values(values)
    block = export.export(kind, values, result)
    back = export.read(block)
    return block, back, result


@pytest.mark.parametrize("query", [
    {"model": "llama-3.1-70b", "mode": "infer", "engine": "vllm", "tp": "4", "seq": "8192", "new_tokens": "512"},
    {"model": "qwen3-next-80b-a3b", "mode": "infer", "engine": "vllm", "tp": "4", "kv_dtype": "fp8", "gpu_util": "0.85"},
    {"model": "deepseek-v3", "mode": "infer", "engine": "vllm", "tp": "8", "pp": "2", "speculative": "mtp",
     "gpu": "h200-141gb"},
])
def test_a_vllm_serve_line_round_trips(query):
    block, back, result = _round_trip("vllm", query)
    words = shlex.split(block)
    assert words[:2] == ["vllm", "serve"] and "--tensor-parallel-size" in words
    # the GPU is the machine, not a flag: it is given again
    assert estimate({**back, "gpu": query.get("gpu", "h100-sxm-80gb")}).total_bytes == result.total_bytes
    assert back.get("kv_dtype") == query.get("kv_dtype") and back.get("speculative") == query.get("speculative")


@pytest.mark.parametrize("query", [
    {"model": "llama-3.1-8b", "batch": "4", "microbatches": "8", "recompute": "full"},
    {"model": "llama-3.1-8b", "batch": "2", "dp": "8", "fsdp": "FULL_SHARD", "optimizer_impl": "foreach"},
])
def test_training_arguments_round_trip(query):
    block, back, result = _round_trip("trainer", query)
    args = json.loads(block)
    assert args["per_device_train_batch_size"] == int(query["batch"])
    assert estimate({**back, "model": query["model"], "dp": query.get("dp", "1")}).total_bytes == result.total_bytes


def test_a_deepspeed_config_round_trips():
    query = {"model": "llama-3.1-8b", "batch": "2", "microbatches": "4", "dp": "8", "zero": "3", "offload": "optimizer",
             "framework": "deepspeed"}
    block, back, result = _round_trip("deepspeed", query)
    assert json.loads(block)["zero_optimization"] == {"stage": 3, "offload_optimizer": {"device": "cpu"}}
    again = estimate({**back, "model": "llama-3.1-8b", "dp": "8", "framework": "deepspeed"})
    assert again.total_bytes == result.total_bytes


@pytest.mark.parametrize("text", ["", "hello", "[1, 2]", "vllm serve 'x", "{not json"])
def test_a_block_that_is_none_of_them_is_refused_by_name(text):
    with pytest.raises(InputError, match="export"):
        export.read(text)


def test_the_command_line_prints_the_block(capsys):
    from pycore.output import cli
    assert cli.main(["--export", "vllm", "model=llama-3.1-70b", "mode=infer", "engine=vllm", "tp=4"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("vllm serve meta-llama/") and "--tensor-parallel-size 4" in line
    assert cli.main(["--export=deepspeed", "zero=2", "dp=8", "framework=deepspeed"]) == 0
    assert json.loads(capsys.readouterr().out)["zero_optimization"]["stage"] == 2
    assert cli.main(["--export", "slurm", "model=llama-3.1-8b"]) == 2
    assert "--export: got 'slurm'; accepts vllm | trainer | deepspeed" in capsys.readouterr().err
