"""Precision policies: which dtype each memory pool is kept in."""

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pycore.inputs.schema import Values
    from pycore.model.architecture import Architecture

# Bits per element. int4/nf4 storage scales are added by the weights model, not here.
BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4, "nf4": 4, "none": 0}


def dtype_name(element_bytes: float) -> str:
    """How a pool's label names its element size: fp32, 16-bit, 8-bit or 4-bit (bf16 and fp16 look alike in
    memory, as do fp8 and int8, int4 and nf4), else the bytes themselves (0 B where a dtype is "none")."""
    bits = element_bytes * 8
    if bits == BITS["fp32"]:
        return "fp32"
    if bits and bits in BITS.values():
        return f"{bits:g}-bit"
    return f"{element_bytes:g} B"


@dataclass(frozen=True)
class Policy:
    weight: str
    grad: str
    master: str
    opt: str
    act: str
    kv: str
    autocast: bool          # fp32 weights computed in 16 bit by torch.autocast
    gather: str = ""        # dtype FSDP all-gathers the weights in to compute ("": the weights' own)

    def bytes(self, pool: str) -> float:
        """Bytes per element of a pool ('weight', 'grad', ...), as a float (int4 is 0.5)."""
        if pool == "gather":
            return BITS[self.gather or self.weight] / 8
        return BITS[getattr(self, pool)] / 8


POLICIES = {
    "fp32": Policy("fp32", "fp32", "none", "fp32", "fp32", "fp32", False),
    "amp-bf16": Policy("fp32", "fp32", "none", "fp32", "bf16", "bf16", True),
    "amp-fp16": Policy("fp32", "fp32", "none", "fp32", "fp16", "fp16", True),
    "bf16-master": Policy("bf16", "bf16", "fp32", "fp32", "bf16", "bf16", False),
    "fp16-master": Policy("fp16", "fp16", "fp32", "fp32", "fp16", "fp16", False),
    "bf16": Policy("bf16", "bf16", "none", "bf16", "bf16", "bf16", False),
    "fp16": Policy("fp16", "fp16", "none", "fp16", "fp16", "fp16", False),
    # FSDP2's MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) (torch/distributed/fsdp/_fully_shard/
    # _fsdp_api.py; torchtitan's default): fp32 shards, gradients and state; each layer all-gathered in bf16
    # and computed in bf16 without autocast; no persistent 16-bit copy of the shards.
    "fsdp2-bf16": Policy("fp32", "fp32", "none", "fp32", "bf16", "bf16", False, gather="bf16"),
}


# precision=auto: training follows the framework (pycore/inputs/frameworks.py: the Hugging Face Trainer trains in
# the checkpoint's dtype; torchtitan in amp-bf16; Megatron and DeepSpeed in fp32 unless told); serving
# loads the checkpoint's own dtype, as transformers 5 (dtype="auto" by default) and vLLM (--dtype auto) do.
# vLLM runs fp32 checkpoints in bf16 (vllm/config/model.py, _resolve_auto_dtype).
TRAINING_DEFAULT = "amp-bf16"


def serving_dtype(arch_dtype: str, engine: str = "hf") -> str:
    """The dtype a serving engine loads a checkpoint in when none is given; bf16 where unknown."""
    dtype = arch_dtype or "bf16"
    if engine == "vllm" and dtype == "fp32":
        return "bf16"
    return dtype


def checkpoint_dtype(values: "Values") -> bool:
    """Whether serving takes the checkpoint's own dtype, vLLM's --dtype auto: no precision and no weight dtype given."""
    return values.get("precision") == "auto" and values.get("weight_dtype") in (None, "auto")


def named_policy(values: "Values", arch: "Architecture | None" = None) -> str:
    """The precision name in force: the one given, or what precision=auto resolves to."""
    given: str = values["precision"]
    if given != "auto":
        return given
    if values["mode"] == "infer":
        return serving_dtype(getattr(arch, "dtype", ""), values.get("engine", "hf"))
    from pycore.inputs.frameworks import CHECKPOINT_DTYPE, DEFAULT, FRAMEWORKS, RECIPES, framework_name, recipe_of
    name = framework_name(values)
    recipe = RECIPES.get(recipe_of(values))
    if name == DEFAULT and recipe and "precision" in recipe.defaults:      # TRL's, for a post-training recipe
        return recipe.defaults["precision"]
    if name in CHECKPOINT_DTYPE:
        return getattr(arch, "dtype", "") or "bf16"
    default: str = FRAMEWORKS[name].defaults.get("precision", TRAINING_DEFAULT)
    return default


def policy(values: "Values", arch: "Architecture | None" = None) -> Policy:
    """The policy for parsed inputs: the named precision with any *_dtype overrides applied."""
    base = POLICIES[named_policy(values, arch)]
    changes = {pool: values[f"{pool}_dtype"] for pool in ("weight", "grad", "master", "opt", "act", "kv")
               if values.get(f"{pool}_dtype")}
    return Policy(**{**base.__dict__, **changes}) if changes else base
