"""Launch settings out and back (pycore/output/export.py): each block, pasted back, gives the same estimate.

Flag and key names: vLLM 0.11 EngineArgs (vllm/engine/arg_utils.py: --tensor-parallel-size, --max-model-len,
--gpu-memory-utilization, --max-num-batched-tokens, --dtype, --kv-cache-dtype, --quantization, --enable-expert-parallel,
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
from pycore.output import export, web


def _round_trip(kind, query):
    values = parse(query)
    result = estimate_values(values)
    block = export.export(kind, values, result)
    back = export.read(block)
    return block, back, result


def test_a_dtype_vllm_refuses_is_named_unread_and_a_weight_dtype_goes_out_as_itself():
    # --dtype takes auto, half, float16, bfloat16, float and float32 (vllm/config/model.py); bf16 is not one of them
    assert export.read("vllm serve m --dtype bf16").get("precision") is None
    assert export.unread("vllm serve m --dtype bf16") == ["--dtype"]
    values = parse({"model": "llama-3.1-8b", "mode": "infer", "engine": "vllm", "weight_dtype": "fp32"})
    assert "--dtype float32" in export.export("vllm", values, estimate_values(values))


@pytest.mark.parametrize("query", [
    {"model": "llama-3.1-70b", "mode": "infer", "engine": "vllm", "tp": "4", "seq": "8192", "new_tokens": "512"},
    {"model": "qwen3-next-80b-a3b", "mode": "infer", "engine": "vllm", "tp": "4", "kv_dtype": "fp8", "gpu_util": "0.85"},
    {"model": "deepseek-v3", "mode": "infer", "engine": "vllm", "tp": "8", "pp": "2", "speculative": "mtp",
     "gpu": "h200-141gb"},
    # --dtype float32 (vllm/config/model.py) was left unread: read back as the checkpoint's bf16 (a newcomer's finding)
    {"model": "qwen2.5-7b", "mode": "infer", "engine": "vllm", "precision": "fp32", "seq": "4096"},
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


# The PyTorch-native launchers (pycore/output/export_pytorch.py): each block, pasted back, gives the same estimate
# for what the framework can say (accelerate: FSDP or ZeRO with precision and checkpointing; torchtitan: every
# parallel degree, the batch, accumulation, sequence and activation checkpointing; torchtune: its FSDP recipes).
ROUND_TRIPS = [
    ("accelerate", {"model": "llama-3.1-8b", "framework": "accelerate", "dp": "8", "fsdp": "FULL_SHARD",
                    "recompute": "full", "precision": "amp-bf16"}),
    ("accelerate", {"model": "llama-3.1-8b", "framework": "accelerate", "dp": "4", "zero": "3", "offload": "optimizer",
                    "microbatches": "8"}),
    ("accelerate", {"model": "qwen2.5-0.5b", "framework": "accelerate", "dp": "2", "fsdp": "FULL_SHARD",
                    "offload": "params"}),
    ("torchtitan", {"model": "llama-3.1-70b", "framework": "torchtitan", "dp": "8", "tp": "8", "fsdp": "FULL_SHARD",
                    "microbatches": "2", "recompute": "op", "seq": "8192"}),
    ("torchtitan", {"model": "llama-3.1-8b", "framework": "torchtitan", "dp": "4", "pp": "2", "fsdp": "FULL_SHARD",
                    "batch": "2", "microbatches": "4", "recompute": "layer"}),
    ("torchtune", {"model": "llama-3.1-8b", "framework": "torchtune", "dp": "8", "fsdp": "FULL_SHARD",
                   "batch": "2", "microbatches": "4", "seq": "4096", "recompute": "full"}),
    ("torchtune", {"model": "llama-3.1-8b", "framework": "torchtune", "method": "lora", "lora_rank": "32",
                   "dp": "2", "fsdp": "FULL_SHARD", "offload": "params"}),
]


@pytest.mark.parametrize("kind,query", ROUND_TRIPS)
def test_a_pytorch_launcher_block_round_trips(kind, query):
    values = parse(query)
    block = export.export(kind, values, estimate_values(values))
    back = export.read(block)
    assert estimate({"model": query["model"], **back}).total_bytes == estimate(query).total_bytes


def test_the_pytorch_launcher_blocks_say_what_they_are():
    values = parse({"model": "llama-3.1-70b", "framework": "torchtitan", "dp": "8", "tp": "8", "fsdp": "FULL_SHARD",
                    "microbatches": "2"})
    result = estimate_values(values)
    titan = export.export("torchtitan", values, result)
    # torchtitan divides global_batch_size by local_batch_size x the data-parallel degrees to get the accumulation
    assert "global_batch_size = 16" in titan and "tensor_parallel_degree = 8" in titan
    accelerate = export.export("accelerate", values, result)
    assert "distributed_type: FSDP" in accelerate and "fsdp_version: 2" in accelerate
    tune = export.export("torchtune", values, result)
    assert tune.startswith("tune run --nproc_per_node 64 full_finetune_distributed") and "tensor_parallel_dim=8" in tune


@pytest.mark.parametrize("text,message", [
    ("[training\nlocal_batch_size = 2", "not a readable TOML file"),
    ("distributed_type FSDP", "line 1 is not 'key: value'"),
    ("foo: bar", "not a vllm serve line, TrainingArguments or DeepSpeed JSON, accelerate, torchtune or axolotl"),
    ("tune run 'unclosed", "unclosed quote"),
])
def test_a_malformed_launcher_block_is_refused_by_name(text, message):
    with pytest.raises(InputError, match=message):
        export.read(text)


@pytest.mark.parametrize("framework,kinds", [("torchtitan", ["torchtitan"]), ("torchtune", ["torchtune"]),
                                             ("accelerate", ["accelerate", "trainer"]),
                                             ("hf-trainer", ["trainer", "deepspeed"])])
def test_the_page_offers_the_launcher_of_the_framework_in_the_form(framework, kinds):
    shown = json.loads(web.launch(f"model=llama-3.1-8b&dp=8&fsdp=FULL_SHARD&framework={framework}"))["blocks"]
    assert [block["kind"] for block in shown] == kinds
    assert all(block["follows"].startswith("Names as in ") for block in shown)


AXOLOTL = """base_model: meta-llama/Llama-3.1-8B
load_in_4bit: true
adapter: qlora
lora_r: 32
lora_target_linear: true
sequence_len: 4096
micro_batch_size: 2
gradient_accumulation_steps: 4
gradient_checkpointing: true
optimizer: paged_adamw_8bit
"""
TORCHTUNE = """batch_size: 2
gradient_accumulation_steps: 8
dtype: bf16
enable_activation_checkpointing: True
model:
  _component_: torchtune.models.llama3_1.lora_llama3_1_8b
  lora_rank: 8
tokenizer:
  _component_: torchtune.models.llama3.llama3_tokenizer
  max_seq_len: 2048
"""


def test_an_axolotl_config_sets_the_inputs_it_names():
    # axolotl v0.18.0's keys (docs' config reference): a QLoRA run over every linear layer
    assert export.read(AXOLOTL) == {"mode": "train", "framework": "axolotl", "batch": "2", "microbatches": "4",
                                    "seq": "4096", "lora_rank": "32", "recompute": "full", "method": "qlora",
                                    "lora_targets": "all-linear"}
    assert export.unread(AXOLOTL) == ["base_model", "optimizer"]


def test_a_torchtune_recipe_config_reads_as_its_overrides_do():
    assert export.read(TORCHTUNE) == {"mode": "train", "framework": "torchtune", "batch": "2", "microbatches": "8",
                                      "seq": "2048", "lora_rank": "8", "recompute": "full", "precision": "bf16",
                                      "method": "lora"}
    assert export.unread(TORCHTUNE) == ["tokenizer._component_"]


def test_review_findings_on_pasted_and_exported_settings():
    # a torchtitan batch of 0 or of words, an optim that is no string: refused by name, never an exception
    message = json.loads(web.launch_read("[training]\nlocal_batch_size = 0\nglobal_batch_size = 8"))["message"]
    assert "Refused: batch: got '0'" in message
    assert "optim" in json.loads(web.launch_read('{"per_device_train_batch_size": 2, "optim": [1]}'))["message"]
    # with pipeline stages torchtitan's local batch holds the schedule's micro-batches (pipeline_parallel_microbatch_size
    # rows each), and the block reads back to the same setup
    query = {"model": "llama-3.1-8b", "framework": "torchtitan", "pp": "4", "microbatches": "8", "batch": "2"}
    values = parse(query)
    block = export.export("torchtitan", values, estimate_values(values))
    assert "local_batch_size = 16" in block and "pipeline_parallel_microbatch_size = 2" in block
    back = export.read(block)
    assert (back["batch"], back["microbatches"], back["pp"]) == ("2", "8", "4")
    # a training launcher for a serving setup is refused, and DoRA reaches torchtune's LoRA recipe
    with pytest.raises(InputError, match="torchtitan does not fit mode=infer"):
        export.export("torchtitan", parse({"model": "llama-3.1-8b", "mode": "infer"}),
                      estimate_values(parse({"model": "llama-3.1-8b", "mode": "infer"})))
    dora = parse({"model": "llama-3.1-8b", "method": "dpo-lora", "lora_variant": "dora", "framework": "torchtune"})
    line = export.export("torchtune", dora, estimate_values(dora))
    assert "lora_finetune_distributed" in line and "model.use_dora=True" in line
    assert export.read(line)["lora_variant"] == "dora"
