"""What a hybrid's state-space, linear-attention and convolution layers save for backward, per token.

Measured with transformers 5.24's reference torch kernels (validation/measure_hybrid.py, its ``MIXER_FORMULAS``
fitted to every saved tensor's shape: within 0.01% for Mamba-2 and 0.03% for gated DeltaNet in bf16, 1-3% under
amp and for Mamba-1). That is the path a GPU runs too when mamba_ssm / causal_conv1d / flash-linear-attention are
not installed; their fused kernels save 5-17 times less (from their source; gated DeltaNet's with
flash-linear-attention measured on an H200 by validation/measure_cuda_families.py, docs/validation.md), which is said
in the estimate's notes. Each figure excludes the mixer's input (the norm's output, counted with the norm) and is per
token: a sequence padded to the chunk (l) is taken as whole chunks, and the chunk states (H·P·N per chunk) spread
over its tokens as 2·H·P·N / l.
"""

from typing import TYPE_CHECKING

from pycore.model.mixers import deltanet_widths, mamba2_widths

if TYPE_CHECKING:
    from pycore.model.architecture import Architecture

DELTANET_CHUNK = 64             # transformers' torch_chunk_gated_delta_rule chunk_size


def _mamba2(arch: "Architecture", e: float, amp: bool) -> float:
    inner, conv = mamba2_widths(arch)
    heads, groups, state, chunk = arch.ssm_heads, arch.ssm_groups, arch.ssm_state, arch.ssm_chunk
    chunk_states = 2 * heads * arch.ssm_head_dim * state / chunk
    projection = 2 * inner + 2 * groups * state + heads
    if amp:
        return 2 * (arch.hidden + 2 * conv + inner) + 2 * (3 * inner + 4 * heads * state + 2 * heads * chunk) + \
            2 * chunk_states + 4 * (5 * inner + 2 * heads + groups) + \
            4 * (2 * inner + heads * state + heads * chunk + 2 * heads)
    scan = 4 * (5 * inner + 5 * heads * state + 3 * heads * chunk + 2 * heads) + 4 * chunk_states
    if e >= 4:
        return 4 * (projection + conv + 2 * heads) + 4 * (5 * inner + heads + groups + 2 * groups * state) + scan
    return 2 * (projection + conv + 2 * heads + inner) + 4 * (5 * inner + 2 * heads + groups) + scan


def _deltanet(arch: "Architecture", e: float, amp: bool) -> float:
    key, value = deltanet_widths(arch)
    heads, dk, dv, chunk = arch.linear_value_heads, arch.linear_key_dim, arch.linear_value_dim, DELTANET_CHUNK
    conv = 2 * key + value
    state = heads * dk * dv / chunk
    if amp:
        return 2 * (arch.hidden + 2 * conv + heads + 7 * heads * dk + 3 * heads * chunk + 4 * heads * dv + 2 * state) \
            + 4 * (6 * heads * dk + 2 * heads * chunk + 6 * heads * dv + 9 * heads + state)
    if e >= 4:
        return 4 * (2 * conv + 12 * heads * dk + 5 * heads * chunk + 9 * heads * dv + 10 * heads + state)
    return 2 * (2 * conv + heads + 3 * heads * dv) + \
        4 * (8 * heads * dk + 5 * heads * chunk + 6 * heads * dv + 9 * heads + state)


def _mamba1(arch: "Architecture", e: float, amp: bool) -> float:
    inner, state, rank = arch.ssm_inner, arch.ssm_state, arch.ssm_dt_rank
    if amp:
        return 2 * (arch.hidden + 7 * inner + inner * state + 2 * rank + 2 * state) + \
            4 * (3 * inner * state + 4 * inner + 3 * state + rank)
    if e >= 4:
        return 4 * (3 * inner * state + 9 * inner + 3 * rank + 6 * state + 3)
    return 2 * (9 * inner + inner * state + rank + 2 * state) + 4 * (3 * inner * state + 2 * inner + 3 * state + rank)


def _short_conv(arch: "Architecture", e: float, amp: bool) -> float:
    return 2 * arch.hidden * 7 if amp else e * arch.hidden * 6


def prefill_transient(arch: "Architecture", seq: int, e: float, fused: bool = False) -> float:
    """Bytes per token one scan layer holds for a moment during a prefill of ``seq`` tokens (0 for short convolutions
    and attention-only models). Mamba-2 and gated DeltaNet: the whole mixer's moment, read off the code
    (mamba2_chunk_scan, deltanet_chunk_rule; with the fused kernels mamba2_ssd_forward, deltanet_fla_forward).
    Mamba-1: 3.2 × D·N·4 for its reference token-by-token scan, fitted to validation/measure_hybrid.py's generate()
    cases, beside the MLP's intermediates; 0 with selective_scan_fn, which keeps its states on chip."""
    kinds = set(arch.layer_pattern)
    transient = 0.0
    if fused:
        if kinds & set("MP"):
            transient = mamba2_ssd_forward(arch, e)
        return max(transient, deltanet_fla_forward(arch, e)) if "L" in kinds else transient
    if kinds & set("MP"):
        transient = max(transient, mamba2_chunk_scan(arch, seq, e))
    if "L" in kinds:
        transient = max(transient, deltanet_chunk_rule(arch, seq, e))
    if "m" in kinds:
        transient = max(transient, 3.2 * arch.ssm_inner * arch.ssm_state * 4)
    return transient


def deltanet_chunk_rule(arch: "Architecture", seq: int, e: float) -> float:
    """Bytes per token a gated DeltaNet mixer holds at the widest moment of a prefill with transformers' reference
    ``torch_chunk_gated_delta_rule`` (5.24, modeling_qwen3_next.py and qwen3_5): fp32 q and k repeated to the value
    heads, k_beta, the decayed k_beta and k_cumdecay (6 × Hv·dk·4 with q's rescaled copy), v, v_beta, new_values and
    the output (4 × Hv·dv·4), the pairwise decay, the UT system and the intra-chunk attention (3 × Hv·64·4, chunks of
    64), over the sequence padded to whole chunks; beside them in the model's dtype the convolution's output and z, b
    and a, and for Qwen3-Next in_proj_qkvz's whole output, which z views, and z's reordered copy. Read off the live
    tensors at the peaks of an H200's 16,384-token prefills (validation/measured_cuda_explain.txt: Qwen3.5-9B's text
    model, Qwen3-Next-80B's first 4 layers: ten Hv·128·4 and three Hv·64·4 per token)."""
    key_width, value_width = deltanet_widths(arch)
    heads = arch.linear_value_heads
    k, v, p = 4 * heads * arch.linear_key_dim, 4 * heads * arch.linear_value_dim, 4 * heads * DELTANET_CHUNK
    rule = 6 * k + 4 * v + 3 * p + 16 * heads
    padded = -(-seq // DELTANET_CHUNK) * DELTANET_CHUNK / seq if seq > 0 else 1.0
    return rule * padded + e * _deltanet_outside(arch)


def mamba2_ssd_forward(arch: "Architecture", e: float) -> float:
    """Bytes per token a Mamba-2 mixer holds in a prefill with mamba_ssm's ``mamba_chunk_scan_combined``
    (ops/triton/ssd_combined.py _mamba_chunk_scan_combined_fwd, from its source, not measured here): dt and its
    cumulative sum per head and the chunk states in fp32, the passed states in C's dtype, C·B per group and chunk
    (l × l) in fp32, the output and out_x in x's dtype; beside them the in_proj and convolution outputs."""
    heads, chunk = arch.ssm_heads, arch.ssm_chunk
    states = heads * arch.ssm_head_dim * arch.ssm_state / chunk
    scan = 4 * 2 * heads + 4 * states + e * states + 4 * arch.ssm_groups * chunk + 2 * e * heads * arch.ssm_head_dim
    return scan + e * _mamba2_outside(arch)


def deltanet_fla_forward(arch: "Architecture", e: float) -> float:
    """Bytes per token a gated DeltaNet mixer holds in a prefill with flash-linear-attention's
    ``chunk_gated_delta_rule`` (fla-core 0.6.0 ops/gated_delta_rule/chunk.py, chunk_gated_delta_rule_fwd): the
    l2-normalised q and k at their own heads, w, u, v_new and the output, the 64-wide A per value head and the chunk
    states h (value heads × dk × dv a chunk of 64) in k's dtype, q's and k's rstd and g's cumsum in fp32; beside them the
    mixer's own tensors as with the reference rule (deltanet_chunk_rule). Measured with torch's convolution on an
    H200 (validation/measured_cuda_families.json, the fla cases)."""
    key_width, value_width = deltanet_widths(arch)
    heads, key_heads = arch.linear_value_heads, arch.linear_key_heads
    rule = e * (2 * key_width + heads * arch.linear_key_dim + 3 * value_width + DELTANET_CHUNK * heads +
                value_width * arch.linear_key_dim / DELTANET_CHUNK) + 4 * (2 * key_heads + heads)
    return rule + e * _deltanet_outside(arch)


def _deltanet_outside(arch: "Architecture") -> int:
    """Elements per token of a DeltaNet mixer's own tensors beside its rule: the convolution's output and z, b and a,
    and for Qwen3-Next in_proj_qkvz's whole output, which z views, and z's reordered copy."""
    key_width, value_width = deltanet_widths(arch)
    if arch.hf_class.startswith("Qwen3Next"):
        return 4 * key_width + 4 * value_width + 2 * arch.linear_value_heads
    return 2 * key_width + 2 * value_width + 2 * arch.linear_value_heads    # Qwen3.5's in_proj_qkv output is freed


def mamba2_chunk_scan(arch: "Architecture", seq: int, e: float) -> float:
    """Bytes per token a Mamba-2 mixer holds at the widest moment of a prefill with transformers' reference scan
    (transformers 5.24 ``mamba2_chunk_scan`` in modeling_nemotron_h.py, falcon_h1, granitemoehybrid, mamba2): the
    in_proj output (z, xBC, dt) and the convolution's output in the model's dtype, and the scan's fp32 tensors, each
    per token in units of HP = H·P·4, HN = H·N·4 (B and C repeated to the heads), HL = H·l·4 ((chunk × chunk) per
    head) and S = H·P·N·4 / l (a chunk's state), over the sequence padded to whole chunks. The widest of three
    moments: Y_diag's einsum (D·x, the padded x, B and C, L, G, M and M's contiguous copy, x's copy and the output:
    4·HP + 2·HN + 4·HL), the chunk states' einsum (4·HP + 2·S + 4·HN + 3·HL, B_decay and its copy with them), and the
    output's sum with D·x (7·HP + S + 3·HN + 3·HL). Read off the live tensors at the peaks of an H200's prefills
    (validation/measured_cuda_explain.txt: Nemotron-Nano-12B-v2 at 4,096 tokens, 2,823 MiB of them beside the
    formula's 2,816; Falcon-H1-0.5B) and checked on every Mamba-2 generate() case, CPU and GPU (within 3.6%)."""
    heads, chunk = arch.ssm_heads, arch.ssm_chunk
    hp, hn, hl = 4 * heads * arch.ssm_head_dim, 4 * heads * arch.ssm_state, 4 * heads * chunk
    state = hp * arch.ssm_state / chunk
    scan = max(4 * hp + 2 * hn + 4 * hl, 4 * hp + 2 * state + 4 * hn + 3 * hl, 7 * hp + state + 3 * hn + 3 * hl)
    padded = -(-seq // chunk) * chunk / seq if seq > 0 else 1.0
    return scan * padded + e * _mamba2_outside(arch)


def _mamba2_outside(arch: "Architecture") -> int:
    """Elements per token of a Mamba-2 mixer's own tensors beside its scan: the in_proj output (z, xBC, dt) and the
    convolution's output."""
    inner, conv = mamba2_widths(arch)
    return inner + conv + arch.ssm_heads + conv


def backward_working(arch: "Architecture", fused: bool = False) -> float:
    """Bytes per token a Mamba-1 layer's reference scan (transformers' slow_forward, token by token) holds during
    its backward: the gradients of discrete_A, discrete_B, deltaB_u and the exponent, each [b, d_inner, l, d_state]
    in fp32, 4·D·N·4 (validation/measure_hybrid.py's Jamba training cases measure 4.1-4.2·D·N·4 of temporaries at
    the peak). 0 without Mamba-1 layers and with selective_scan_fn, which recomputes its states in the kernel."""
    if fused or "m" not in arch.layer_pattern:
        return 0.0
    return 4 * arch.ssm_inner * arch.ssm_state * 4


def fused_saved(arch: "Architecture", mixer: str, e: float) -> float:
    """What the fused kernels save per token, from their source (validation/measure_hybrid.py's docstring; fla's
    gated DeltaNet measured on an H200 with torch's convolution, validation/measured_cuda_families.json):
    mamba_split_conv1d_scan_combined keeps the input projection's output, out_x and the norm's rstd; fla's
    chunk_gated_delta_rule q, k (repeated to the value heads), their rstd, v, g, beta and a 64-wide block per head;
    causal_conv1d its input and gates; selective_scan_fn (Mamba-1) its inputs and dt."""
    if mixer in "MP":
        inner, _ = mamba2_widths(arch)
        saved = e * (3 * inner + 2 * arch.ssm_groups * arch.ssm_state + arch.ssm_heads) + 4 * arch.ssm_groups
        return saved + (e * arch.hidden if mixer == "P" else 0)
    if mixer == "L":
        key, value = deltanet_widths(arch)
        heads, dk, dv = arch.linear_value_heads, arch.linear_key_dim, arch.linear_value_dim
        return e * (2 * (2 * key + value) + 2 * heads * dk + 65 * heads + 3 * heads * dv) + \
            4 * (2 * heads + 4 * heads + 3 * heads * dv)
    if mixer == "m":
        return e * (6 * arch.ssm_inner + 2 * arch.ssm_state + arch.ssm_dt_rank)
    return 6 * arch.hidden * e


def padding(arch: "Architecture", mixer: str, seq: int, fused: bool = False) -> float:
    """How much longer the reference chunked scans make a sequence of ``seq`` tokens: transformers pads it to whole
    chunks (torch_chunk_gated_delta_rule's 64, Mamba-2's chunk_size) before splitting it, and every padded tensor
    is saved at that length. The whole mixer is counted at the padded length, an upper bound: 70% of a DeltaNet
    mixer's and 64% of a Mamba-2 mixer's saved bytes grow with the padding (measured at 200 tokens against whole
    chunks, validation/measure_vl.py's Qwen3.5 cases). 1 for unchunked mixers and the fused kernels."""
    chunk = DELTANET_CHUNK if mixer == "L" else arch.ssm_chunk if mixer in "MP" else 0
    if fused or not chunk or seq <= 0:
        return 1.0
    return -(-seq // chunk) * chunk / seq


def mixer_saved(arch: "Architecture", mixer: str, e: float, amp: bool, fused: bool = False) -> float:
    """Bytes per token one layer of ``mixer`` (M, P's Mamba-2 half, m, L, V) saves for backward, with the
    reference torch kernels (measured) or the fused ones (``fused``: from their source)."""
    if fused:
        return fused_saved(arch, mixer, e)
    if mixer in "MP":
        return _mamba2(arch, e, amp) + (e * arch.hidden if mixer == "P" else 0)   # Falcon-H1 keeps h·e more
    return {"m": _mamba1, "L": _deltanet, "V": _short_conv}[mixer](arch, e, amp)
