"""Layers that are not all alike: which token mixer and which MLP each layer index has, and the parameters of
the mixers that are not attention (Mamba, Mamba-2, gated DeltaNet, short convolutions).

Hybrid models keep a KV cache only in their attention layers; their state-space, linear-attention and
convolution layers keep a fixed-size state per sequence instead. ``Architecture.layer_pattern`` says which
layer is which, one letter per layer index:

=====  ==========================================================================================
A      full attention (every token cached)
S      sliding-window attention (at most ``sliding_window`` tokens cached)
C      chunked local attention (Llama 4: tokens of the current chunk of ``sliding_window``)
L      gated DeltaNet linear attention (Qwen3-Next ``Qwen3NextGatedDeltaNet``)
M      Mamba-2 (``Mamba2Mixer``: Granite 4.0 hybrid, Nemotron-H, Mamba-2)
m      Mamba (``JambaMambaMixer``)
V      short convolution (LFM2 ``Lfm2ShortConv``)
P      attention and Mamba-2 side by side, summed (Falcon-H1)
``-``  none (Nemotron-H's MLP-only and MoE-only blocks)
=====  ==========================================================================================

``mlp_pattern``: D a dense MLP, E routed experts, ``-`` none. Each count follows the module of the transformers
class named beside it (transformers 5.24), checked against ``sum(p.numel())`` on the meta device
(validation/config_counts.json).
"""

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from pycore.model.architecture import Architecture

MIXERS = {"A": "full attention", "S": "sliding-window attention", "C": "chunked attention",
          "L": "gated DeltaNet (linear attention)", "M": "Mamba-2", "m": "Mamba", "V": "short convolution",
          "P": "attention + Mamba-2 in parallel", "-": "no mixer"}
MLPS = {"D": "dense MLP", "E": "experts", "-": "no MLP"}
ATTENTION = frozenset("ASCP")       # mixers that keep keys and values per token
STATEFUL = frozenset("LMmVP")       # mixers that keep a fixed-size state per sequence


def check_patterns(arch: "Architecture") -> None:
    """ValueError naming the field when a pattern has the wrong length or an unknown letter."""
    for name, pattern, letters in (("layer_pattern", arch.layer_pattern, MIXERS),
                                   ("mlp_pattern", arch.mlp_pattern, MLPS)):
        if not pattern:
            continue
        if len(pattern) != arch.layers:
            raise ValueError(f"{name}: one letter per layer ({arch.layers}), got {len(pattern)}")
        unknown = sorted(set(pattern) - set(letters))
        if unknown:
            raise ValueError(f"{name}: letters {', '.join(letters)} only, got {unknown[0]!r}")
    if "E" in arch.mlp_pattern and not arch.experts:
        raise ValueError("mlp_pattern: experts layers (E) need experts > 0")


def mixer_at(arch: "Architecture", index: int) -> str:
    """The mixer letter of layer ``index`` ("A" for every layer of a model without a pattern)."""
    return arch.layer_pattern[index] if arch.layer_pattern else "A"


def mlp_at(arch: "Architecture", index: int) -> str:
    """The MLP letter of layer ``index``: from mlp_pattern, else dense for the leading dense_layers of an MoE."""
    if arch.mlp_pattern:
        return arch.mlp_pattern[index]
    return "D" if not arch.experts or index < arch.dense_layers else "E"


def layer_counts(arch: "Architecture", first: int = 0, count: "int | None" = None) -> "dict[str, int]":
    """How many of layers ``first`` .. ``first + count - 1`` have each mixer letter."""
    end = arch.layers if count is None else first + count
    if not arch.layer_pattern:
        return {"A": end - first}
    counts: "dict[str, int]" = {}
    for letter in arch.layer_pattern[first:end]:
        counts[letter] = counts.get(letter, 0) + 1
    return counts


def layer_kinds(arch: "Architecture") -> "dict[tuple[str, str], tuple[int, int]]":
    """(mixer, MLP) letters -> (how many layers have them, the index of the first): layers alike counted once."""
    kinds: "dict[tuple[str, str], tuple[int, int]]" = {}
    for index in range(arch.layers):
        key = (mixer_at(arch, index), mlp_at(arch, index))
        number, first = kinds.get(key, (0, index))
        kinds[key] = (number + 1, first)
    return kinds


def window_layers(arch: "Architecture", first: int, count: int) -> "dict[str, int]":
    """Layers of each attention kind among ``first`` .. ``first + count - 1``: full (A, P), sliding (S; without a
    pattern, a sliding_window model's layers but every global_every-th), chunked (C)."""
    if not arch.layer_pattern and arch.sliding_window:
        full = sum(1 for i in range(first, first + count) if arch.global_every and (i + 1) % arch.global_every == 0)
        return {"full": full, "sliding": count - full, "chunked": 0}
    counts = layer_counts(arch, first, count)
    return {"full": counts.get("A", 0) + counts.get("P", 0), "sliding": counts.get("S", 0),
            "chunked": counts.get("C", 0)}


def layers_read(arch: "Architecture") -> "tuple[tuple[str, int], ...]":
    """(kind in words, how many layers) of a model read layer by layer; () when every layer is alike."""
    if not arch.layer_pattern and not arch.mlp_pattern:
        return ()
    mixers = [(MIXERS[letter], count) for letter, count in layer_counts(arch).items()]
    experts = arch.mlp_pattern.count("E") if arch.mlp_pattern else 0
    return tuple(mixers + ([("with routed experts", experts)] if experts else []))


def mamba2_widths(arch: "Architecture") -> "tuple[int, int]":
    """Mamba-2's inner width and its convolution's channels: x, B and C (intermediate + 2 · groups · state)."""
    return arch.ssm_inner, arch.ssm_inner + 2 * arch.ssm_groups * arch.ssm_state


def deltanet_widths(arch: "Architecture") -> "tuple[int, int]":
    """Gated DeltaNet's key width (key heads × key size) and value width (value heads × value size)."""
    return arch.linear_key_heads * arch.linear_key_dim, arch.linear_value_heads * arch.linear_value_dim


def _mamba2(arch: "Architecture") -> int:
    """transformers Mamba2Mixer (and GraniteMoeHybridMambaLayer, NemotronHMamba2Mixer, FalconH1Mixer)."""
    h, heads = arch.hidden, arch.ssm_heads
    inner, conv = mamba2_widths(arch)
    projection = inner + conv + heads                       # z, xBC and dt from one in_proj
    bias = (projection + h) if arch.ssm_proj_bias else 0
    return h * projection + conv * arch.conv_kernel + (conv if arch.conv_bias else 0) + 3 * heads + \
        (inner if arch.ssm_norm else 0) + inner * h + bias  # dt_bias, A_log, D; gated norm; out_proj


def _mamba1(arch: "Architecture") -> int:
    """transformers JambaMambaMixer: in_proj to x and z, conv, x_proj to (dt, B, C), dt_proj, A_log, D."""
    h, inner, state, rank = arch.hidden, arch.ssm_inner, arch.ssm_state, arch.ssm_dt_rank
    bias = (2 * inner + h) if arch.ssm_proj_bias else 0
    norms = (rank + 2 * state) if arch.ssm_dt_norms else 0
    return h * 2 * inner + inner * arch.conv_kernel + (inner if arch.conv_bias else 0) + \
        inner * (rank + 2 * state) + rank * inner + inner + inner * state + inner + inner * h + bias + norms


def _deltanet(arch: "Architecture") -> int:
    """transformers Qwen3NextGatedDeltaNet: in_proj_qkvz, in_proj_ba, conv over q, k, v, dt_bias, A_log, the
    gated norm over one value head, out_proj."""
    h, value_heads = arch.hidden, arch.linear_value_heads
    key, value = deltanet_widths(arch)
    return h * (2 * key + 2 * value) + h * 2 * value_heads + (2 * key + value) * arch.conv_kernel + \
        2 * value_heads + arch.linear_value_dim + value * h


def _short_conv(arch: "Architecture") -> int:
    """transformers Lfm2ShortConv: in_proj to 3 × hidden, a depthwise convolution, out_proj."""
    h = arch.hidden
    return 3 * h * h + h * arch.conv_kernel + h * h + ((3 * h + h + h) if arch.conv_bias else 0)


def mixer_params(arch: "Architecture", mixer: str, attention: int) -> int:
    """Parameters of one layer's token mixer; ``attention`` is the count of one attention block."""
    if mixer in "ASC":
        return attention
    if mixer == "P":
        return attention + _mamba2(arch)
    if mixer == "-":
        return 0
    return _STATEFUL_PARAMS[mixer](arch)


_STATEFUL_PARAMS: "dict[str, Callable[[Architecture], int]]" = {"M": _mamba2, "m": _mamba1, "L": _deltanet,
                                                                "V": _short_conv}
