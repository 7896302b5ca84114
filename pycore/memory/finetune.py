"""LoRA and QLoRA: adapters are the only trainable parameters.

LoRA (Hu et al. 2021) adds, beside each adapted linear layer W (in × out), two matrices A (in × r) and
B (r × out): r·(in + out) parameters. Gradients and optimizer state exist for the adapters only. PEFT
keeps adapters in fp32 when the base is 16-bit (its autocast_adapter_dtype default). The frozen base
still stores what backward needs through it, except the inputs of frozen linear layers, whose weight
gradient is never computed. QLoRA (Dettmers et al. 2023) stores the base in NF4 and computes in bf16. DoRA
(Liu et al. 2024, PEFT's use_dora) adds a trained magnitude per output, the outputs it multiplies, and a
column-norm working set in every adapted layer's forward.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pycore.model.mixers import ATTENTION, mixer_at, mlp_at

if TYPE_CHECKING:
    from collections.abc import Iterable

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


def layers_with(arch: "Architecture", name: str) -> int:
    """Layers that hold the linear layer ``name``: q, k, v and o the attention layers (a hybrid's state-space and
    convolution layers have none: LFM2's Lfm2ShortConv has in_proj and out_proj, which PEFT's q_proj/v_proj
    targets do not match), gate, up and down the layers with an MLP (none in Nemotron-H's mixer-only blocks)."""
    if name in ("q", "k", "v", "o"):
        return sum(1 for index in range(arch.layers) if mixer_at(arch, index) in ATTENTION)
    return sum(1 for index in range(arch.layers) if mlp_at(arch, index) != "-")


def adapter_params(arch: "Architecture", rank: int, targets: str, dora: bool = False) -> int:
    """Trainable LoRA parameters of the whole model; DoRA adds a magnitude per output of each adapted layer
    (peft/tuners/lora/dora.py DoraLinearLayer.weight)."""
    chosen = TARGETS[targets]
    return sum(layers_with(arch, name) * copies * (rank * (fan_in + fan_out) + (fan_out if dora else 0))
               for name, fan_in, fan_out, copies in _linears(arch) if name in chosen)


def dora_outputs(arch: "Architecture", targets: str, adapter_bytes: float, act_bytes: float, amp: bool) -> float:
    """Bytes per token DoRA keeps beside LoRA's, per layer (peft 0.21 dora.py DoraLinearLayer.forward:
    ``(mag_norm_scale - 1) * base_result + mag_norm_scale * lora_result * scaling`` with a trained magnitude): the
    base layer's output (the activations' dtype, 16-bit under autocast) and lora_B's (the adapters' dtype, 16-bit
    under autocast), out values each, for every adapted layer (validation/measured_lora.json's dora_study: 6·out
    in bf16 with fp32 adapters, 4·out under amp-bf16)."""
    chosen, routed = TARGETS[targets], max(arch.experts_per_token, 1)
    base, lora = (2.0, 2.0) if amp else (act_bytes, adapter_bytes)
    return sum(min(copies, routed) * fan_out * (base + lora) for name, _, fan_out, copies in _linears(arch)
               if name in chosen)


def dora_norm_working(arch: "Architecture", targets: str, adapter_bytes: float) -> "tuple[int, str]":
    """(bytes, the layer) of DoRA's column-norm working set, the largest adapted layer's (peft 0.21 dora.py
    get_lora_weight and get_weight_norm, built in every adapted layer's forward and freed when it ends):
    torch.eye(in) and lora_B(lora_A(eye)) in the adapters' dtype, the frozen weight cast to it, scaling·ΔW and
    their sum: in² + 4·in·out values at once."""
    chosen = TARGETS[targets]
    sizes = [(int((fan_in * fan_in + 4 * fan_in * fan_out) * adapter_bytes), name)
             for name, fan_in, fan_out, _ in _linears(arch) if name in chosen]
    return max(sizes) if sizes else (0, "")


# The input each linear layer reads: one norm's output feeds q, k and v, another's gate and up.
GROUPS = {"q": "qkv", "k": "qkv", "v": "qkv", "o": "o", "gate": "gate_up", "up": "gate_up", "down": "down"}
WIDTHS = {"qkv": "h", "o": "a·d", "gate_up": "h", "down": "f"}


def _sum_of(symbols: "Iterable[str]") -> str:
    """A sum of widths in short: h, h, a·d -> 2·h + a·d."""
    counts: "dict[str, int]" = {}
    for symbol in symbols:
        counts[symbol] = counts.get(symbol, 0) + 1
    return " + ".join(symbol if n == 1 else f"{n}·{symbol}" for symbol, n in counts.items())


def input_bytes(name: str, act_bytes: float, amp: bool) -> float:
    """Bytes per element of a linear layer's input: under autocast q, k, v, gate and up read a norm's fp32 output
    and o and down read 16-bit tensors (SDPA's output, act(gate)·up); otherwise the activation dtype."""
    if amp:
        return 2 if GROUPS[name] in ("o", "down") else 4
    return act_bytes


@dataclass(frozen=True)
class AdapterSaved:
    """What the adapted linear layers of one layer keep for backward, in bytes per token (PEFT's lora.Linear)."""

    copies: float               # lora_A's own copy of its input, one per adapted layer
    copies_formula: str
    masks: float                # nn.Dropout's 1-byte masks, one per adapted layer
    masks_formula: str
    first_masks: float          # the masks of the layers reading the first norm (none in the first layer)
    shared: "dict[str, tuple[float, str]]"  # group -> (bytes, formula) of an input lora_A keeps uncopied, once
    a_outputs: float            # lora_A's outputs, which lora_B keeps
    a_formula: str


def adapter_saved(arch: "Architecture", rank: int, targets: str, adapter_bytes: float, act_bytes: float,
                  amp: bool, dropout: bool) -> AdapterSaved:
    """What PEFT's lora.Linear keeps for backward with the base frozen (peft 0.21.2, peft/tuners/lora/layer.py
    ``Linear.forward`` lines 1088-1102; validation/measured_lora.json's saved tensors):

    - ``self.base_layer(x)``: the frozen linear keeps nothing of x (its weight needs no gradient);
    - ``x = self._cast_input_dtype(x, lora_A.weight.dtype)``: a copy of x in the adapters' dtype, one per
      adapted layer, when x is in another dtype (a 16-bit base under PEFT's fp32 adapters);
    - ``lora_B(lora_A(dropout(x)))``: with lora_dropout, a 1-byte mask and the dropped copy per adapted layer;
      under autocast lora_A keeps its own 16-bit copy of what it reads; lora_B keeps lora_A's output, r values
      a token (16-bit under autocast, else the adapters' dtype). Where nothing was copied, lora_A keeps x
      itself, shared by the layers of its group.
    """
    chosen = TARGETS[targets]
    routed = max(arch.experts_per_token, 1)         # a token passes through its experts only
    kept = 2 if amp else adapter_bytes
    copied: "list[tuple[str, float]]" = []
    shared: "dict[str, tuple[float, str]]" = {}
    count = 0.0
    for name, fan_in, _, copies in _linears(arch):
        if name not in chosen:
            continue
        n = min(copies, routed)
        share = layers_with(arch, name) / arch.layers    # per layer on average: a hybrid's layers without it
        count += n * share
        x = input_bytes(name, act_bytes, amp)
        if x != adapter_bytes or dropout or (amp and adapter_bytes != 2):
            copied += [(GROUPS[name], fan_in * share)] * n
        else:
            shared[GROUPS[name]] = (x * fan_in * share, f"{x:g}·{WIDTHS[GROUPS[name]]}" + _of_layers(share))
    symbols = _sum_of(WIDTHS[group] for group, _ in copied)
    inputs = sum(width for _, width in copied)
    first = sum(width for group, width in copied if group == "qkv")
    part = _of_layers(min((layers_with(arch, name) / arch.layers for name in chosen), default=1.0))
    return AdapterSaved(kept * inputs, f"{kept:g}·({symbols}){part}" if copied else "0",
                        inputs if dropout else 0, f"1·({symbols}){part}" if dropout and copied else "0",
                        first if dropout else 0, shared, count * rank * kept, f"{kept:g}·r ×{count:g}")


def _of_layers(share: float) -> str:
    """" × 0.5 (the share of layers that have them)" where the adapted linear layers are in some layers only (a
    hybrid's), "" where every layer has them."""
    return "" if share == 1 else f" × {share:.3g} (the share of layers that have them)"
