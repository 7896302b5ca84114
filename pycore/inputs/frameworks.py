"""What each training framework does by default that changes memory, with the line that sets it.

``defaults`` use pycore's schema keys and values (``optimizer_impl`` takes ``optimizer.KERNELS``), as
typed on the command line; a key is present only where the framework decides it. ``behaviours`` holds
what the schema has no key for yet:

- ``grad_accum_dtype``: dtype gradients accumulate in across micro-batches (``weight``: the parameters'
  own ``.grad``, in their dtype);
- ``reduce_dtype``: dtype of the data-parallel gradient reduction (``weight``: as the gradients are);
- ``recompute_saves``: what activation checkpointing keeps of each checkpointed block when enabled.

Every value in both has a source: repository, path, version (tag or release) and line, read from the
release's own files. Frameworks that leave the optimizer to the user (PyTorch, Accelerate, Lightning,
DeepSpeed's config) are given ``torch.optim.AdamW`` built with no kernel argument, or DeepSpeed's
``"type": "AdamW"``, and say so in their source.
"""

from dataclasses import dataclass, field
from typing import Any, Mapping

from pycore.inputs.schema import Values


@dataclass(frozen=True)
class Framework:
    name: str               # how users call it
    version: str            # release the defaults were read at
    defaults: "Mapping[str, str]"   # schema key -> value string
    sources: "Mapping[str, str]"    # key of defaults or behaviours -> "repo path@version Lnn: what it says"
    behaviours: "Mapping[str, str]" = field(default_factory=dict)   # grad_accum_dtype, reduce_dtype, recompute_saves


TORCH = "pytorch/pytorch torch/optim"
TORCH_DEFAULT_KERNEL = ("pytorch/pytorch torch/optim/adam.py@v2.13.0 L937-945: with foreach and fused both "
                        "None, _default_to_fused_or_foreach(params, use_fused=False) picks foreach on cuda, xpu "
                        "and mtia (torch/utils/_foreach_utils.py L8-10), the single-tensor loop elsewhere (CPU)")
HF_TRAINER_OPTIMIZER = ("huggingface/transformers src/transformers/training_args.py@v5.23.0 L806-811: "
                        "default_optim = 'adamw_torch_fused' when torch >= 2.8, else 'adamw_torch'")
HF_FUSED = ("huggingface/transformers src/transformers/trainer_optimizer.py@v5.23.0 L201-208: "
            "adamw_torch_fused builds torch.optim.AdamW(fused=True)")
HF_SDPA = ("huggingface/transformers src/transformers/modeling_utils.py@v5.23.0 L1846: "
           "applicable_attention = 'sdpa' if no attn_implementation is requested")
HF_LOSS = ("huggingface/transformers src/transformers/loss/loss_utils.py@v5.23.0 L61: ForCausalLMLoss upcasts "
           "the whole logits tensor with logits.float(), unchunked")
HF_CHECKPOINT = ("huggingface/transformers src/transformers/modeling_layers.py@v5.23.0 L54 GradientCheckpointingLayer "
                 "wraps each decoder layer; modeling_utils.py L3149 use_reentrant=False; the layer's input is "
                 "saved and the layer recomputed")
GRAD_IN_PARAM = ("pytorch/pytorch: autograd's AccumulateGrad sums into param.grad, which has the parameter's "
                 "dtype; no separate accumulation buffer")

FRAMEWORKS = {
    "pytorch": Framework(
        "PyTorch", "2.13.0",
        {"optimizer": "adamw", "optimizer_impl": "foreach", "precision": "fp32", "recompute": "none"},
        {
            "optimizer": "pytorch/pytorch: torch.optim has no default optimizer; torch.optim.AdamW(params) "
                         "assumed, the usual choice for transformers",
            "optimizer_impl": TORCH_DEFAULT_KERNEL,
            "precision": "pytorch/pytorch torch.get_default_dtype() is float32; no autocast unless "
                         "torch.autocast is entered",
            "recompute": "pytorch/pytorch torch/utils/checkpoint.py@v2.13.0: only regions wrapped in "
                         "torch.utils.checkpoint.checkpoint are recomputed",
            "grad_accum_dtype": GRAD_IN_PARAM,
            "reduce_dtype": "pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fsdp_api.py@v2.13.0 "
                            "L51-52: MixedPrecisionPolicy param_dtype=None, reduce_dtype=None (reduce in the "
                            "gradients' dtype); DDP all-reduces .grad as it is",
            "recompute_saves": "pytorch/pytorch torch/utils/checkpoint.py@v2.13.0: checkpoint(fn, *args) "
                               "saves args, the inputs of the wrapped region",
        },
        {"grad_accum_dtype": "weight", "reduce_dtype": "weight", "recompute_saves": "region inputs"},
    ),
    "hf-trainer": Framework(
        "Hugging Face Trainer", "5.23.0",
        {"optimizer": "adamw", "optimizer_impl": "fused", "precision": "bf16", "attention": "flash",
         "loss_chunks": "1", "recompute": "none"},
        {
            "optimizer": HF_TRAINER_OPTIMIZER,
            "optimizer_impl": HF_FUSED,
            "precision": "huggingface/transformers src/transformers/modeling_utils.py@v5.23.0 L4178: "
                         "from_pretrained's dtype defaults to 'auto', the checkpoint's dtype (bf16 for Llama 3, "
                         "Qwen2.5, Mistral), and training_args.py L874-885 bf16=False, fp16=False (no autocast): "
                         "weights, gradients and AdamW state all in bf16. fp32 checkpoints (GPT-2, BERT) train in "
                         "fp32; dtype=torch.float32 with bf16=True gives amp-bf16",
            "attention": HF_SDPA,
            "loss_chunks": HF_LOSS,
            "recompute": "huggingface/transformers src/transformers/training_args.py@v5.23.0 L908-909: "
                         "activation_checkpointing defaults to None (off)",
            "grad_accum_dtype": GRAD_IN_PARAM + " (Trainer calls backward per micro-batch into .grad)",
            "reduce_dtype": "pytorch/pytorch DDP all-reduces .grad in its dtype (the Trainer wraps the model "
                            "with Accelerate's DDP)",
            "recompute_saves": HF_CHECKPOINT,
        },
        {"grad_accum_dtype": "weight", "reduce_dtype": "weight", "recompute_saves": "layer input"},
    ),
    "accelerate": Framework(
        "Hugging Face Accelerate", "1.14.0",
        {"optimizer": "adamw", "optimizer_impl": "foreach", "precision": "fp32", "recompute": "none"},
        {
            "optimizer": "huggingface/accelerate: Accelerator.prepare() wraps the user's optimizer; "
                         "torch.optim.AdamW(params) assumed",
            "optimizer_impl": TORCH_DEFAULT_KERNEL,
            "precision": "huggingface/accelerate src/accelerate/state.py@v1.14.0 L924-926: mixed_precision "
                         "defaults to ACCELERATE_MIXED_PRECISION or 'no' (no autocast; weights stay in the "
                         "dtype they were loaded in); 'bf16' enables autocast (amp-bf16)",
            "recompute": "huggingface/accelerate src/accelerate/utils/dataclasses.py@v1.14.0 L1785-1786: "
                         "FullyShardedDataParallelPlugin activation_checkpointing defaults to None (off)",
            "grad_accum_dtype": GRAD_IN_PARAM,
            "reduce_dtype": "huggingface/accelerate src/accelerate/utils/dataclasses.py@v1.14.0 L2118: "
                            "FSDP mixed precision sets param_dtype = reduce_dtype = the mixed-precision dtype "
                            "(bf16 reduces in bf16); without it, gradients reduce in their own dtype",
            "recompute_saves": "huggingface/accelerate: FSDP activation checkpointing wraps each "
                               "transformer layer (fsdp_transformer_layer_cls_to_wrap), saving its input",
        },
        {"grad_accum_dtype": "weight", "reduce_dtype": "weight", "recompute_saves": "layer input"},
    ),
    "lightning": Framework(
        "PyTorch Lightning", "2.6.0",
        {"optimizer": "adamw", "optimizer_impl": "foreach", "precision": "fp32", "recompute": "none"},
        {
            "optimizer": "Lightning-AI/pytorch-lightning: configure_optimizers() returns the user's "
                         "optimizer; torch.optim.AdamW(params) assumed",
            "optimizer_impl": TORCH_DEFAULT_KERNEL,
            "precision": "Lightning-AI/pytorch-lightning src/lightning/pytorch/trainer/trainer.py@2.6.0 L155: "
                         "precision defaults to '32-true' (accelerator_connector.py L122)",
            "recompute": "Lightning-AI/pytorch-lightning src/lightning/pytorch/strategies/fsdp.py@2.6.0 L160: "
                         "activation_checkpointing_policy defaults to None",
            "grad_accum_dtype": GRAD_IN_PARAM,
            "reduce_dtype": "Lightning-AI/pytorch-lightning src/lightning/fabric/plugins/precision/fsdp.py@2.6.0 "
                            "L94-99: param_dtype = reduce_dtype = buffer_dtype = the precision's dtype "
                            "(float32 for 32-true, bfloat16 for bf16-mixed)",
            "recompute_saves": "Lightning-AI/pytorch-lightning src/lightning/pytorch/strategies/fsdp.py@2.6.0: "
                               "activation_checkpointing_policy wraps the listed layer classes, saving their input",
        },
        {"grad_accum_dtype": "weight", "reduce_dtype": "weight", "recompute_saves": "layer input"},
    ),
    "torchtune": Framework(
        "torchtune", "0.6.1",
        {"optimizer": "adamw", "optimizer_impl": "fused", "precision": "bf16", "attention": "flash-repeat",
         "loss_chunks": "8", "recompute": "full"},
        {
            "optimizer": "pytorch/torchtune recipes/configs/llama3_1/8B_full.yaml@v0.6.1 L58-59: "
                         "_component_: torch.optim.AdamW",
            "optimizer_impl": "pytorch/torchtune recipes/configs/llama3_1/8B_full.yaml@v0.6.1 L61: fused: True",
            "precision": "pytorch/torchtune recipes/configs/llama3_1/8B_full.yaml@v0.6.1 L79: dtype: bf16; "
                         "recipes/full_finetune_distributed.py L539 builds the model under "
                         "set_default_dtype(bf16): weights, gradients and AdamW state in bf16",
            "attention": "pytorch/torchtune torchtune/modules/attention.py@v0.6.1: grouped-query K/V are expanded to "
                         "every head (k.unsqueeze(2).expand(...).flatten(1, 2)) before L141 _sdpa_or_flex_attention "
                         "(attention_utils.py L259: nn.functional.scaled_dot_product_attention)",
            "loss_chunks": "pytorch/torchtune recipes/configs/llama3_1/8B_full.yaml@v0.6.1 L62-63 "
                           "CEWithChunkedOutputLoss; torchtune/modules/loss/ce_chunked_output_loss.py L30 "
                           "num_output_chunks: int = 8, each chunk upcast with .float() (L42)",
            "recompute": "pytorch/torchtune recipes/configs/llama3_1/8B_full.yaml@v0.6.1 L74: "
                         "enable_activation_checkpointing: True",
            "grad_accum_dtype": GRAD_IN_PARAM + " (bf16 parameters)",
            "reduce_dtype": "pytorch/torchtune torchtune/training/_distributed.py@v0.6.1 L552: fully_shard with "
                            "no mp_policy, so FSDP2 reduces in the bf16 parameters' dtype",
            "recompute_saves": "pytorch/torchtune recipes/full_finetune_distributed.py@v0.6.1 L576-579: "
                               "set_activation_checkpointing(auto_wrap_policy={TransformerSelfAttentionLayer}), "
                               "the whole layer, saving its input",
        },
        {"grad_accum_dtype": "weight", "reduce_dtype": "weight", "recompute_saves": "layer input"},
    ),
    "torchtitan": Framework(
        "torchtitan", "0.2.2",
        {"optimizer": "adamw", "optimizer_impl": "fused", "precision": "fsdp2-bf16", "attention": "flash",
         "loss_chunks": "1", "recompute": "op"},
        {
            "optimizer": "pytorch/torchtitan torchtitan/config/job_config.py@v0.2.2 L135: name = 'AdamW'",
            "optimizer_impl": "pytorch/torchtitan torchtitan/config/job_config.py@v0.2.2 L151: "
                              "implementation = 'fused' (components/optimizer.py L300-311 passes fused=True)",
            "precision": "pytorch/torchtitan torchtitan/config/job_config.py@v0.2.2 L275 dtype = 'float32' "
                         "(fp32 sharded weights, gradients and AdamW state) and L282 mixed_precision_param = "
                         "'bfloat16': FSDP2 MixedPrecisionPolicy(param_dtype=bf16) computes with bf16 copies "
                         "(models/llama3/infra/parallelize.py L313), torch.autocast without FSDP",
            "attention": "pytorch/torchtitan torchtitan/models/llama3/model/args.py@v0.2.2 L45: attn_type = 'sdpa'",
            "loss_chunks": "pytorch/torchtitan torchtitan/components/loss.py@v0.2.2 L22-23: "
                           "cross_entropy(pred.flatten(0, 1).float(), ...), unchunked",
            "grad_accum_dtype": "pytorch/torchtitan torchtitan/config/job_config.py@v0.2.2 L290: "
                                "mixed_precision_reduce = 'float32'; FSDP2 reduce-scatters into the fp32 "
                                "sharded gradients and accumulates there",
            "reduce_dtype": "pytorch/torchtitan torchtitan/config/job_config.py@v0.2.2 L290: "
                            "mixed_precision_reduce = 'float32'",
            "recompute": "pytorch/torchtitan torchtitan/models/llama3/train_configs/llama3_8b.toml@v0.2.2 "
                         "L58-59: [activation_checkpoint] mode = 'selective', selective_ac_option = 'op' "
                         "(recompute=op); job_config.py L652-655's default without a toml is '2' "
                         "(recompute=layer)",
            "recompute_saves": "pytorch/torchtitan torchtitan/distributed/activation_checkpoint.py@v0.2.2 "
                               "_custom_policy: the outputs of mm (all but every second), SDPA and "
                               "reduce-scatter, and each block's input",
        },
        {"grad_accum_dtype": "fp32", "reduce_dtype": "fp32",
         "recompute_saves": "every other matmul output, attention output, block input"},
    ),
    "megatron": Framework(
        "Megatron-LM", "core_v0.19.0",
        {"optimizer": "adamw", "optimizer_impl": "fused", "precision": "fp32", "attention": "flash",
         "recompute": "none"},
        {
            "optimizer": "NVIDIA/Megatron-LM megatron/training/arguments.py@core_v0.19.0 L2776: --optimizer "
                         "default 'adam'; megatron/core/optimizer/optimizer_config.py L250 "
                         "decoupled_weight_decay = True (AdamW)",
            "optimizer_impl": "NVIDIA/Megatron-LM megatron/core/optimizer/__init__.py@core_v0.19.0 L14-20: "
                              "Transformer Engine's FusedAdam, else Apex's FusedAdam (multi-tensor kernels)",
            "precision": "NVIDIA/Megatron-LM megatron/core/model_parallel_config.py@core_v0.19.0 L177-180: "
                         "fp16 = bf16 = False (fp32); the usual --bf16 gives bf16 weights with fp32 main "
                         "params and Adam state (optimizer_config.py L200-206), pycore's bf16-master",
            "attention": "NVIDIA/Megatron-LM megatron/core/transformer/transformer_config.py@core_v0.19.0 L144: "
                         "attention_backend = AttnBackend.auto (Transformer Engine's flash or fused kernel)",
            "recompute": "NVIDIA/Megatron-LM megatron/core/transformer/transformer_config.py@core_v0.19.0 L518: "
                         "recompute_granularity = None",
            "grad_accum_dtype": "NVIDIA/Megatron-LM megatron/training/arguments.py@core_v0.19.0 L1190-1194: "
                                "with bf16, accumulate_allreduce_grads_in_fp32 = True unless --grad-reduce-in-bf16 "
                                "(main_grads_dtype fp32, optimizer_config.py L197): an fp32 main_grad buffer",
            "reduce_dtype": "NVIDIA/Megatron-LM megatron/training/arguments.py@core_v0.19.0 L1190-1194: "
                            "gradients all-reduced in fp32 (--grad-reduce-in-bf16 turns it off)",
            "recompute_saves": "NVIDIA/Megatron-LM megatron/training/arguments.py@core_v0.19.0: "
                               "--recompute-granularity full checkpoints whole transformer layers (their input "
                               "saved); selective recomputes the attention core (Korthikanti et al. 2022)",
        },
        {"grad_accum_dtype": "fp32", "reduce_dtype": "fp32", "recompute_saves": "layer input"},
    ),
    "deepspeed": Framework(
        "DeepSpeed", "0.16.4",
        {"optimizer": "adamw", "optimizer_impl": "fused", "precision": "fp32", "zero": "0"},
        {
            "optimizer": "microsoft/DeepSpeed deepspeed/runtime/engine.py@v0.16.4 L1415-1420: the config's "
                         "\"type\": \"Adam\" or \"AdamW\" (no default type) runs AdamW, adam_w_mode defaulting to "
                         "True (runtime/config.py L94)",
            "optimizer_impl": "microsoft/DeepSpeed deepspeed/runtime/engine.py@v0.16.4 L1434-1440: FusedAdam "
                              "(deepspeed/ops/adam/fused_adam.py L179-191: multi_tensor_applier)",
            "precision": "microsoft/DeepSpeed deepspeed/runtime/constants.py@v0.16.4 L127 and L154: bf16 and fp16 "
                         "disabled by default (fp32); bf16.enabled gives bf16 weights with an fp32 master copy "
                         "in the optimizer, pycore's bf16-master",
            "zero": "microsoft/DeepSpeed deepspeed/runtime/zero/config.py@v0.16.4 L91: stage = 0",
            "grad_accum_dtype": "microsoft/DeepSpeed deepspeed/runtime/engine.py@v0.16.4 L1010-1025: "
                                "data_types.grad_accum_dtype unset -> the model dtype, except bf16 without ZeRO "
                                "-> fp32",
            "reduce_dtype": "microsoft/DeepSpeed deepspeed/runtime/engine.py@v0.16.4 L939-950: "
                            "communication_data_type unset -> fp16 with fp16, bf16 with bf16, else fp32",
            "recompute_saves": "microsoft/DeepSpeed deepspeed/runtime/activation_checkpointing/checkpointing.py"
                               "@v0.16.4: checkpoint(function, *args) saves the wrapped layer's inputs",
        },
        {"grad_accum_dtype": "weight", "reduce_dtype": "weight", "recompute_saves": "layer input"},
    ),
    "axolotl": Framework(
        "Axolotl", "0.18.0",
        {"optimizer": "adamw", "optimizer_impl": "fused", "precision": "bf16", "attention": "flash",
         "loss_chunks": "1", "recompute": "none"},
        {
            "optimizer": "axolotl-ai-cloud/axolotl src/axolotl/utils/schemas/training.py@v0.18.0 L122-123: "
                         "optimizer default 'adamw_torch_fused'",
            "optimizer_impl": "axolotl-ai-cloud/axolotl src/axolotl/utils/schemas/training.py@v0.18.0 L123 "
                              "'adamw_torch_fused', which transformers builds with fused=True (" + HF_FUSED + ")",
            "precision": "axolotl-ai-cloud/axolotl src/axolotl/utils/schemas/config.py@v0.18.0 L559-560: bf16 "
                         "default 'auto', True on bf16 GPUs (utils/config/__init__.py L158-162), which sets "
                         "torch_dtype = torch.bfloat16 (L191-192) for loading: all-bf16 weights, gradients and "
                         "AdamW state",
            "attention": "axolotl-ai-cloud/axolotl: attn_implementation unset leaves transformers' default; "
                         + HF_SDPA,
            "loss_chunks": "axolotl-ai-cloud/axolotl src/axolotl/utils/schemas/config.py@v0.18.0 L978: "
                           "chunked_cross_entropy default None; " + HF_LOSS,
            "recompute": "axolotl-ai-cloud/axolotl src/axolotl/utils/schemas/config.py@v0.18.0 L600-601: "
                         "gradient_checkpointing default False",
            "grad_accum_dtype": GRAD_IN_PARAM + " (bf16 parameters, through the Hugging Face Trainer)",
            "reduce_dtype": "pytorch/pytorch DDP all-reduces .grad in its dtype (bf16)",
            "recompute_saves": HF_CHECKPOINT,
        },
        {"grad_accum_dtype": "weight", "reduce_dtype": "weight", "recompute_saves": "layer input"},
    ),
}


def describe(name: str) -> str:
    """One line naming the framework and the defaults it sets, such as
    "as Hugging Face Trainer 5.23.0 does by default: optimizer=adamw, optimizer_impl=fused, ...".

    Args:
        name: a key of ``FRAMEWORKS``.
    Returns:
        the line, with the defaults as key=value pairs the command line accepts.
    """
    framework = FRAMEWORKS[name]
    pairs = ", ".join(f"{key}={value}" for key, value in framework.defaults.items())
    return f"as {framework.name} {framework.version} does by default: {pairs}"


DEFAULT = "hf-trainer"
# Frameworks that train in the checkpoint's own dtype by default: the Trainer leaves bf16=False and
# transformers 5 loads dtype="auto" (see hf-trainer's precision source above), so a bf16 checkpoint trains
# in pure bf16 and an fp32 one (GPT-2, BERT) in fp32.
CHECKPOINT_DTYPE = {"hf-trainer", "axolotl"}
# Frameworks whose data parallelism without ZeRO/FSDP is torch's DistributedDataParallel with its default
# gradient_as_bucket_view=False (pytorch/pytorch torch/nn/parallel/distributed.py@v2.13.0; accelerate
# DistributedDataParallelKwargs.gradient_as_bucket_view = False, which the Trainer and Axolotl go through;
# Lightning's DDPStrategy passes none): the reducer allocates flat buckets as large as every gradient at
# construction (torch/csrc/distributed/c10d/reducer.cpp, Reducer::initialize_buckets) and copies each
# gradient into them, a second copy kept for the whole run. Megatron's DDP reduces its contiguous
# gradient buffer itself, and DeepSpeed, torchtune and torchtitan shard.
DDP_COPIES_GRADIENTS = {"pytorch", "hf-trainer", "accelerate", "lightning", "axolotl"}
# Frameworks that skip gradient sync on every micro-batch but the last (grad_sync=last): the Trainer runs them
# under accelerator.no_sync unless sync_each_batch is set or DeepSpeed is used (huggingface/transformers
# src/transformers/trainer.py, _inner_training_loop), and Accelerate's GradientAccumulationPlugin has
# sync_each_batch = False by default (src/accelerate/utils/dataclasses.py). Under FSDP that keeps every
# gradient unsharded until the last micro-batch. The others (torchtitan, PyTorch's FSDP2 default
# set_requires_gradient_sync(True), DeepSpeed's ZeRO) reduce each micro-batch.
NO_SYNC_UNTIL_LAST = {"hf-trainer", "accelerate", "axolotl"}
# Frameworks that pipeline with their own schedule rather than torch.distributed.pipelining: Megatron's last stage
# returns the loss, not the logits (GPTModel.forward, given labels, returns compute_language_model_loss(labels,
# logits); NVIDIA/Megatron-LM megatron/core/models/gpt/gpt_model.py@60e039626 L839-841) and its p2p
# communication allocates each receive buffer when it receives; DeepSpeed's PipelineEngine keeps its own
# buffers. The others pipeline through torch.distributed.pipelining (torchtitan; PyTorch itself), which the
# pipeline pools of pycore.memory.training follow (validation/measured_pipeline.json): PipelineStage allocates
# one receive buffer per micro-batch for the activations a later stage receives and one for the gradients an
# earlier stage receives, and keeps them (pytorch/pytorch torch/distributed/pipelining/stage.py@v2.13.0
# _setup_forward_recv_info L2243-2274, _setup_backward_recv_info L322-333); forward_one_chunk keeps the stage's
# output in fwd_cache until backward_one_chunk pops it (L913, L966), and Schedule1F1B holds the latest output
# until the next forward (schedules.py L1070, L1130), so the last stage's logits live through its backward.
OWN_PIPELINE = {"megatron", "deepspeed"}
# Frameworks with MoE layers of their own, which compute each token's top-k experts only (torchtune's
# TokenChoiceTopKRouter + GroupedExperts, torchtitan's MoE, Megatron's token dispatcher): not transformers'
# Llama4TextMoe, which runs every expert on every token (pycore.model.architecture every_expert)
OWN_MOE = {"torchtune", "torchtitan", "megatron"}
# Frameworks whose models are their own code, not transformers' (whose attention is sdpa_attention_forward)
OWN_MODEL_CODE = OWN_MOE
# Post-training recipes (schema method dpo*, kto*, grpo*, reward*) run on the Hugging Face Trainer
# through TRL, whose configs change some of the Trainer's defaults; pycore.memory.posttraining models the step.
RECIPES = {
    "dpo": Framework(
        "TRL DPOTrainer", "1.16.0", {"recompute": "full", "precision": "amp-bf16"},
        {"recompute": "huggingface/trl trl/trainer/base_config.py@v1.16.0 L62-63: gradient_checkpointing default True "
                      "(DPOConfig's note: 'Defaults to True instead of False'); " + HF_CHECKPOINT,
         "precision": "huggingface/trl trl/trainer/utils.py@v1.16.0 L1332 create_model_from_path: a model given by name "
                      "loads in float32 unless model_init_kwargs names a dtype (trl/trainer/model_config.py L89-92: the "
                      "CLI's ModelConfig.dtype defaults to float32 too), the reference in the policy's dtype "
                      "(dpo_trainer.py L924); base_config.py L68-75, L108: bf16 defaults to True, so the Trainer "
                      "autocasts to bf16: fp32 weights and AdamW states, bf16 compute (precision=bf16 for a model "
                      "loaded in bf16)"}),
}


RECIPES["kto"] = Framework(
    "TRL KTOTrainer", "1.16.0", {"recompute": "full", "precision": "amp-bf16"},
    {"recompute": "huggingface/trl trl/trainer/kto_config.py@v1.16.0 L22, L105: KTOConfig(_BaseConfig), whose "
                  "gradient_checkpointing defaults to True (base_config.py L62-63); " + HF_CHECKPOINT,
     "precision": "huggingface/trl trl/trainer/kto_trainer.py@v1.16.0 L628: a model given by name is loaded by "
                  "create_model_from_path (trl/trainer/utils.py L1332: float32 unless model_init_kwargs names a dtype), "
                  "the reference (L935) in the policy's dtype; kto_config.py L106 and base_config.py L68-75, L108: bf16 "
                  "defaults to True, so the Trainer autocasts to bf16: fp32 weights and AdamW states, bf16 compute "
                  "(precision=bf16 for a model loaded in bf16)"})


RECIPES["grpo"] = Framework(
    "TRL GRPOTrainer", "1.16.0", {"recompute": "full", "precision": "amp-bf16"},
    {"recompute": "huggingface/trl trl/trainer/grpo_config.py@v1.16.0 L23, L407-411: GRPOConfig(_BaseConfig), whose "
                  "gradient_checkpointing defaults to True (base_config.py L62-63); " + HF_CHECKPOINT,
     "precision": "huggingface/trl trl/trainer/grpo_trainer.py@v1.16.0 L348: a model given by name is loaded by "
                  "create_model_from_path (trl/trainer/utils.py L1332: float32 unless model_init_kwargs names a dtype), "
                  "the reference (L1003) in the policy's dtype; base_config.py L68-75, L108: bf16 defaults to True, so "
                  "the Trainer autocasts to bf16: fp32 weights and AdamW states, bf16 compute (precision=bf16 for a "
                  "model loaded in bf16)"})


RECIPES["reward"] = Framework(
    "TRL RewardTrainer", "1.16.0", {"recompute": "full", "precision": "amp-bf16"},
    {"recompute": "huggingface/trl trl/trainer/reward_config.py@v1.16.0 L90: gradient_checkpointing defaults to True "
                  "instead of False; " + HF_CHECKPOINT,
     "precision": "huggingface/trl trl/trainer/reward_trainer.py@v1.16.0 L396-400: a model given by name is loaded "
                  "by create_model_from_path as AutoModelForSequenceClassification with num_labels=1 (float32 unless "
                  "model_init_kwargs names a dtype); reward_config.py L91: bf16 defaults to True, so the Trainer "
                  "autocasts to bf16: fp32 weights and AdamW states, bf16 compute (precision=bf16 for a model loaded "
                  "in bf16)"})


RECIPES["ppo"] = Framework(
    "TRL PPOTrainer", "0.25.1", {"recompute": "none", "precision": "amp-bf16"},
    {"recompute": "huggingface/trl trl/trainer/ppo_trainer.py@v0.25.1 L433-765: PPOTrainer.train replaces Trainer.train "
                  "and never turns gradient checkpointing on (OnPolicyConfig.gradient_checkpointing, default True at "
                  "trl/trainer/utils.py L836-841, is read by the Trainer's own loop only); a policy given with it on "
                  "fails at generate() in 0.25.1 (huggingface/trl#4954, fixed after it by #5245)",
     "precision": "huggingface/trl examples/scripts/ppo/ppo.py: the policy, reference, value and reward models are "
                  "loaded by from_pretrained with no dtype (fp32 under transformers 4.57, TRL 0.25.1's); "
                  "OnPolicyConfig.bf16 None becomes True in __post_init__ (trl/trainer/utils.py L842-849, L957-958), so "
                  "accelerate autocasts PolicyAndValueWrapper's forward to bf16: fp32 weights and AdamW states, the "
                  "update in bf16, the rollout and scoring passes in fp32 (precision=bf16 for models loaded in bf16)"})


RECIPES["distill"] = Framework(
    "TRL DistillationTrainer", "1.16.0", {"recompute": "full", "precision": "amp-bf16"},
    {"recompute": "huggingface/trl trl/trainer/distillation_config.py@v1.16.0 L22, L159: DistillationConfig(_BaseConfig), "
                  "whose gradient_checkpointing defaults to True (base_config.py L62-63); " + HF_CHECKPOINT,
     "precision": "huggingface/trl trl/trainer/distillation_trainer.py@v1.16.0 L347-361: a student given by name is "
                  "loaded by create_model_from_path (trl/trainer/utils.py L1332: float32 unless model_init_kwargs names "
                  "a dtype); distillation_config.py L160: bf16 defaults to True, so accelerate wraps the forward in "
                  "bf16 autocast (amp-bf16), which only the rollout's generate() goes through: compute_loss reaches "
                  "_compute_loss by _forward_redirection (L1803), which swaps that wrapped forward out, so the update "
                  "computes in fp32 (pycore.memory.distillation)"})


def recipe_of(values: "Mapping[str, object]") -> str:
    """The post-training recipe a method names ("dpo" for dpo, dpo-lora, dpo-qlora; "kto" likewise; "grpo" for grpo, grpo-lora), "sft"
    for plain fine-tuning."""
    recipe = str(values.get("method") or "full").partition("-")[0]
    return recipe if recipe in RECIPES else "sft"


# Inputs whose default is "as the framework does": "auto" (None for loss_chunks) until the user sets them.
FOLLOWS: "dict[str, str | None]" = {"optimizer_impl": "auto", "attention": "auto", "recompute": "auto",
                                    "loss_chunks": None}
FALLBACK = {"optimizer_impl": "foreach", "attention": "flash", "recompute": "none", "loss_chunks": "1"}


def apply(values: "Mapping[str, Any]") -> Values:
    """``values`` with each input left to the framework replaced by the framework's default.

    Precision stays "auto" for the frameworks that train in the checkpoint's dtype (pycore.memory.precision
    resolves it with the model at hand) and for serving; any other training framework names its policy. Under the
    Trainer, a post-training recipe's own defaults (``RECIPES``: TRL's configs) come before the Trainer's.
    """
    framework = FRAMEWORKS[framework_name(values)]
    recipe = RECIPES.get(recipe_of(values)) if framework_name(values) == DEFAULT else None
    out = dict(values)
    for key, unset in FOLLOWS.items():
        if out.get(key, unset) == unset:
            text = (recipe.defaults.get(key) if recipe else None) or framework.defaults.get(key, FALLBACK[key])
            out[key] = int(text) if key == "loss_chunks" else text
    if out.get("precision") == "auto" and out.get("mode", "train") == "train" \
            and framework_name(values) not in CHECKPOINT_DTYPE:
        out["precision"] = framework.defaults.get("precision", "fp32")
    if out.get("precision") == "auto" and out.get("mode", "train") == "train" and recipe \
            and "precision" in recipe.defaults:
        out["precision"] = recipe.defaults["precision"]
    return out


def framework_name(values: "Mapping[str, object]") -> str:
    """The framework the inputs name, the default when they name none."""
    return str(values.get("framework") or DEFAULT)
