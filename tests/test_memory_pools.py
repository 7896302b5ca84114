"""The memory stage's pool builders, one pool at a time: where each model-state pool lives (GPU or host) and
in which moments, the dtype names the labels use, and the vLLM sampler's size threshold."""

import pytest

from pycore.inputs.schema import parse
from pycore.memory import finetune, parallel
from pycore.memory.model_states import model_states
from pycore.memory.precision import dtype_name
from pycore.memory.serving import serving
from pycore.memory.setup import resolve
from pycore.model.catalog import gpus

MODEL = "llama-3.2-1b"


def _setup(**inputs):
    setup = resolve(parse({"model": MODEL, **{k: str(v) for k, v in inputs.items()}}))
    return setup, parallel.stages(setup.arch, setup.layout)[0]


@pytest.mark.parametrize("element_bytes, name", [(4, "fp32"), (2, "16-bit"), (1, "8-bit"), (0.5, "4-bit"),
                                                 (0, "0 B"), (8, "8 B")])
def test_dtype_name(element_bytes, name):
    assert dtype_name(element_bytes) == name


@pytest.mark.parametrize("inputs, on_gpu, on_host", [
    ({}, ["weights", "gradients", "master_weights", "optimizer", "optimizer_step_temporaries"], []),
    ({"offload": "optimizer"}, ["weights", "gradients"],
     ["master_weights", "optimizer", "optimizer_step_temporaries", "offloaded_gradients"]),
    ({"offload": "params", "zero": 3, "dp": 8}, ["gathered_weights", "gradients"],
     ["weights", "master_weights", "optimizer", "optimizer_step_temporaries", "offloaded_gradients"]),
])
def test_offload_moves_the_optimizer_pools_to_host_memory(inputs, on_gpu, on_host):
    states = model_states(*_setup(precision="bf16-master", **inputs))
    assert [p.key for p in states.pools] == on_gpu
    assert [p.key for p in states.host] == on_host
    assert all(p.moments == () and "CPU memory" in p.label for p in states.host)


@pytest.mark.parametrize("precision, in_step", [("bf16", True), ("bf16-master", False)])
def test_gradients_live_through_the_step_unless_master_weights_take_them_over(precision, in_step):
    states = model_states(*_setup(precision=precision))
    gradients = next(p for p in states.pools if p.key == "gradients")
    assert ("optimizer step" in gradients.moments) is in_step
    assert gradients.label == "Gradients (16-bit)"


def test_fp32_accumulation_names_its_gradients_fp32():
    states = model_states(*_setup(precision="bf16-master", microbatches=4))
    gradients = next(p for p in states.pools if p.key == "gradients")
    assert states.grad_bytes == 4 and gradients.label == "Gradients (fp32)"
    assert "fp32 accumulation" in gradients.source


def test_lora_trains_the_adapters_only():
    setup, stage = _setup(method="lora", precision="bf16")
    states = model_states(setup, stage)
    adapters = finetune.adapter_params(setup.arch, setup.finetune.rank, setup.finetune.targets)
    assert states.trainable == round(adapters * stage.params / setup.counts.total)
    assert states.grad_bytes == 4                   # lora_dtype fp32 by default
    assert [p.key for p in states.pools] == ["weights", "gradients", "optimizer"]
    optimizer = states.pools[2]
    assert optimizer.bytes == 2 * 4 * states.trainable      # AdamW: two fp32 states per adapter parameter


@pytest.mark.parametrize("gpu, seqs", [("h100-sxm-80gb", "1,024"), ("a100-sxm-80gb", "256"), ("l40s", "256")])
def test_vllm_samples_1024_sequences_on_gpus_of_70_gib_but_the_a100(gpu, seqs):
    setup, _ = _setup(mode="infer", engine="vllm", gpu=gpu)
    result = serving(setup, gpus()[gpu])
    profile = next(p for p in result["pools"] if p.key == "profile_activations")
    assert profile.substituted.endswith(f"× {seqs} × 12")


# interleaved, stage i: 2·(p − i − 1) + (v − 1)·p + 1 chunk forwards in flight, / v (Megatron-LM's
# num_warmup_microbatches; torch.distributed.pipelining ScheduleInterleaved1F1B; validation/measured_pipeline.json)
@pytest.mark.parametrize("interleave, microbatches, expected", [(1, 8, [4, 3, 2, 1]), (1, 2, [2, 2, 2, 1]),
                                                                (2, 8, [4 * (1 + 3 / 8), 4.5, 3.5, 2.5])])
def test_micro_batches_in_flight_per_stage(interleave, microbatches, expected):
    setup = resolve(parse({"model": MODEL, "pp": "4", "interleave": str(interleave),
                           "microbatches": str(microbatches)}))
    assert [s.in_flight for s in parallel.stages(setup.arch, setup.layout)] == expected
