"""LoRA and QLoRA: adapters are the only trainable parameters.

LoRA (Hu et al. 2021) adds, beside each adapted linear layer W (in × out), two matrices A (in × r) and
B (r × out): r·(in + out) parameters. Gradients and optimizer state exist for the adapters only. PEFT
keeps adapters in fp32 when the base is 16-bit (its autocast_adapter_dtype default). The frozen base
still stores what backward needs through it, except the inputs of frozen linear layers, whose weight
gradient is never computed. QLoRA (Dettmers et al. 2023) stores the base in NF4 and computes in bf16.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pycore.model.architecture import Architecture

# Which linear layers each target set adapts (PEFT target_modules names for Llama-style models).
TARGETS = {
    "qv": ("q", "v"),
    "attention": ("q", "k", "v", "o"),
    "all-linear": ("q", "k", "v", "o", "gate", "up", "down"),
}


def _linears(arch: "Architecture") -> "list[tuple[str, int, int, int]]":
    """(name, in, out, copies) of one layer's linear layers."""
    h = arch.hidden
    rows = [("q", h, arch.q_dim, 1), ("k", h, arch.kv_dim, 1), ("v", h, arch.kv_dim, 1), ("o", arch.q_dim, h, 1)]
    experts = max(arch.experts, 1)
    width = arch.expert_ffn or arch.ffn
    if arch.mlp == "gated":
        rows += [("gate", h, width, experts), ("up", h, width, experts), ("down", width, h, experts)]
    else:
        rows += [("up", h, width, experts), ("down", width, h, experts)]
    return rows


def adapter_params(arch: "Architecture", rank: int, targets: str) -> int:
    """Trainable LoRA parameters of the whole model."""
    chosen = TARGETS[targets]
    per_layer = sum(copies * rank * (fan_in + fan_out) for name, fan_in, fan_out, copies in _linears(arch)
                    if name in chosen)
    return arch.layers * per_layer


def adapted_inputs(targets: str) -> "set[str]":
    """Which linear-layer inputs autograd still saves: those of adapted layers (lora_A reads them)."""
    chosen = set(TARGETS[targets])
    feeds = set()
    if chosen & {"q", "k", "v"}:
        feeds.add("qkv")
    if "o" in chosen:
        feeds.add("o")
    if chosen & {"gate", "up"}:
        feeds.add("gate_up")
    if "down" in chosen:
        feeds.add("down")
    return feeds


def adapter_activation_bytes_per_token(arch: "Architecture", rank: int, targets: str, act_bytes: float) -> float:
    """lora_A outputs (rank values per token per adapted layer), saved by lora_B."""
    chosen = TARGETS[targets]
    routed = max(arch.experts_per_token, 1)         # a token passes through its experts only
    count = sum(min(copies, routed) for name, _, _, copies in _linears(arch) if name in chosen)
    return arch.layers * count * rank * act_bytes
