"""Activation memory: the tensors a training step saves for backward.

``detailed`` lists, per transformer layer and per token, every tensor that autograd keeps alive in the
transformers implementation of the architecture (checked against MemTracker in validation/). The other
models reproduce the formulas people already know:

- ``korthikanti``: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
  Models", eq. (1)-(2): s·b·h·L·(34 + 5·a·s/h) bytes at 16 bit; 34·s·b·h·L with selective recompute;
  2·s·b·h·L (the layer inputs) with full recompute.
- ``multiplier``: batch·seq·hidden·layers·act_multiplier·act bytes, as the simple calculators write it
  (multipliers of 8-12 are typical there; 17 at 2 bytes is Korthikanti's 34 bytes per s·b·h).
- ``per-sample``: act_per_sample·batch.
"""

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pycore.base.errors import FieldError
from pycore.base.remember import remembered
from pycore.memory import scan_activations
from pycore.memory.scan_activations import mixer_saved
from pycore.model.mixers import ATTENTION, MIXERS, STATEFUL, layer_kinds, mixer_at, mlp_at, window_layers

if TYPE_CHECKING:
    from pycore.memory.precision import Policy
    from pycore.memory.setup import Setup
    from pycore.model.architecture import Architecture


@dataclass(frozen=True)
class Term:
    """One saved tensor (or a group of same-shaped ones) of a layer, in bytes per token."""

    name: str
    bytes_per_token: float
    formula: str
    replicated: bool = False    # outside the tensor-parallel region (norms, residual path): split only by SP
    feeds: str = ""             # what reads it for a weight's gradient (the linear layers qkv, o, gate_up, down;
                                # a norm's weight): kept only if that weight is trained
    kind: str = ""              # a hybrid's layer kind it belongs to: its mixer and MLP letters (mixers.py)


# per_token's answer: (saved bytes per token per layer, the layer's terms, final-norm bytes per token, working
# bytes per token of one layer's backward)
PerToken = tuple[float, "list[Term]", float, float]


def _norm_terms(arch: "Architecture", e: float, amp: bool, consumers: int, label: str, feeds: str = "") -> "list[Term]":
    """A pre-norm saves its fp32 input, the normalised tensor, and what its consumers read.

    All of it sits outside the tensor-parallel region; the output is what the next linear layers read.
    """
    h = arch.hidden

    def saved(name: str, size: float, formula: str, feeds: str = "") -> Term:
        return Term(f"{label} {name}", size, formula, replicated=True, feeds=feeds)
    if arch.norm == "layernorm":
        # native_layer_norm saves its input and fp32 mean and rstd; consumers save its output.
        terms = [saved("input", (4 if amp else e) * h, f"{4 if amp else e}·h"), saved("mean, rstd", 8, "8")]
    elif arch.norm_weight_fp32:
        # Gemma: x.float(), normalise in fp32, multiply by (1 + weight) in fp32, cast back.
        terms = [saved("fp32 input", 4 * h, "4·h"), saved("normalised", 4 * h, "4·h", "norm"), saved("rsqrt", 4, "4")]
    else:
        # Llama RMSNorm: x.to(fp32) saved by pow and mul, normalised x cast back, saved by ·weight.
        norm_bytes = 4 if amp else e
        terms = [saved("fp32 input", 4 * h, "4·h"), saved("normalised", norm_bytes * h, f"{norm_bytes:g}·h", "norm"),
                 saved("rsqrt", 4, "4")]
    if not consumers:
        return terms                        # a post-norm feeds the residual sum, which saves nothing
    if amp:
        # autocast casts the (fp32) norm output once per consuming linear layer.
        terms.append(Term(f"{label} output cast ×{consumers}", consumers * 2 * h, f"{consumers}·2·h", True, feeds))
    else:
        terms.append(Term(f"{label} output", e * h, f"{e:g}·h", True, feeds))
    return terms


def _qk_norm_terms(arch: "Architecture", e: float, amp: bool) -> "list[Term]":
    """Qwen3 and Gemma 3 normalise each query and key head (RMSNorm over head_dim), OLMo 2 the whole query
    and key: the fp32 input, the normalised value (fp32 where the weight multiplies in fp32: autocast,
    Gemma, OLMo 2) and one rsqrt per normalised row."""
    elements = arch.q_dim + arch.kv_dim
    rows = arch.heads + arch.kv_heads if arch.qk_norm == "head" else 2
    fp32_out = amp or arch.norm_weight_fp32 or arch.qk_norm == "full"
    out = 4 if fp32_out else e
    return [Term("q/k norm fp32 input", 4 * elements, "4·(a + k)·d"),
            Term("q/k norm normalised", out * elements, f"{out:g}·(a + k)·d", feeds="norm"),
            Term("q/k norm rsqrt", 4 * rows, "4 per normalised row")]


def _mla_terms(arch: "Architecture", e: float, amp: bool) -> "list[Term]":
    """Multi-head latent attention's own tensors (transformers DeepseekV2/V3Attention): the compressed
    latent and rotary key from kv_a_proj, its RMSNorm, kv_b_proj's input; the query's down-projection and
    its norm when q_lora_rank is set; DeepSeek-V2's rotary in fp32 complex numbers."""
    r, rope = arch.kv_lora_rank, arch.qk_rope_dim
    norm_out = 4 if amp else e
    terms = [Term("kv latent and rotary key", e * (r + rope), "e·(r_kv + d_rope)"),
             Term("kv latent norm (fp32 input, normalised, rsqrt)", 4 * r + norm_out * r + 4, "4·r_kv + e·r_kv + 4"),
             Term("kv_b_proj input", e * r, "e·r_kv")]
    if arch.q_lora_rank:
        q = arch.q_lora_rank
        terms += [Term("q latent", e * q, "e·r_q"),
                  Term("q latent norm (fp32 input, normalised, rsqrt)", 4 * q + norm_out * q + 4, "4·r_q + e·r_q + 4"),
                  Term("q_b_proj input", e * q, "e·r_q")]
    if arch.rope_fp32:
        terms.append(Term("rotary q and k in fp32 (complex)", 4 * (arch.heads + 1) * rope, "4·(a + 1)·d_rope"))
    return terms


def eager_working(arch: "Architecture", e: float) -> float:
    """Bytes per head and key of one layer's eager attention while it runs under no_grad: the scores, and where
    softmax runs in fp32 from 16-bit scores (softmax(..., dtype=torch.float32)) their fp32 copy beside its fp32
    output: 10 bytes in bf16 (validation/measured_cuda_explain.txt, gemma-2-2b bf16 generate() on an H200: 1 GiB of
    scores and two 2 GiB fp32 blocks at its prefill); else the scores beside a softmax output of 4 bytes."""
    return e + 8 if arch.softmax_fp32 and e < 4 else 4 + e


def gqa_math_kernel(arch: "Architecture", e: float, amp: bool, sm: int = 90) -> bool:
    """Whether CUDA's SDPA runs its math kernel for grouped-query heads that transformers passes with enable_gqa
    (the attention "flash-math", which attention=auto under transformers resolves to on a CUDA GPU of compute
    capability ``sm``): the memory-efficient kernel takes no enable_gqa and the flash kernel only 16-bit inputs on
    sm_80 and later (torch 2.11, sdp_utils.cpp check_sm_version), so fp32 there and every dtype before sm_80 (a
    V100). Measured on an H200: qwen2.5-0.5b fp32 kept a·s² fp32 probabilities a layer, GPT-2 and BERT in fp32 (no
    grouped heads) none (validation/measured_cuda_explain.txt). A CPU's SDPA runs its flash kernel there."""
    return arch.kv_heads != arch.heads and arch.dim_head <= 256 and not arch.sdpa_math and \
        ((e == 4 and not amp) or sm < 80)


def pass_kernel(arch: "Architecture", attention: str, math_sm: int, e: float, amp: bool) -> str:
    """The kernel a pass in another dtype than the step's runs (a rollout's generate(), a teacher's forward): SDPA's
    math kernel where its own dtype sends grouped-query heads there (``math_sm``, the compute capability, set where
    the kernel is transformers' SDPA's choice), else the step's, or flash for the step's math kernel."""
    if math_sm and gqa_math_kernel(arch, e, amp, math_sm):
        return "flash-math"
    return "flash" if attention == "flash-math" else attention


def holds_scores(arch: "Architecture", attention: str, seq: int) -> bool:
    """Whether a layer holds its s×s scores while it runs: eager's, or SDPA's math kernel's in a layer it gets no
    mask in."""
    return attention == "eager" or (attention == "flash-math" and math_share(arch, seq) > 0)


def math_share(arch: "Architecture", seq: int) -> float:
    """The share of layers that run SDPA's math kernel under flash-math: those transformers hands no mask, which a
    sliding or chunked layer gets once the sequence reaches its window (sdpa_attention_forward's use_gqa_in_sdpa
    needs attention_mask None; a masked layer expands K/V itself and runs the memory-efficient kernel)."""
    if not arch.sliding_window or seq < arch.sliding_window or not arch.layers:
        return 1.0
    return window_layers(arch, 0, arch.layers)["full"] / arch.layers


def _math_kernel_terms(arch: "Architecture", e: float, attention: str, seq: int) -> "list[Term]":
    """What SDPA's math kernel (aten _scaled_dot_product_attention_math) keeps for backward: q and the expanded k
    scaled by √scale, the expanded v and the probabilities."""
    q, a = arch.q_dim, arch.heads
    if attention == "flash-math":
        # grouped-query heads in fp32 on CUDA, no mask (validation/measured_cuda_explain.txt, qwen2.5-0.5b fp32
        # b4s1024: 266 MiB a layer = 4·14·1,024² × 4 B + 3 × 14 MiB)
        return [Term("q (scaled, math kernel)", e * q, "e·a·d"),
                Term("k (expanded, scaled), v (expanded)", 2 * e * q, "2·e·a·d"),
                Term("attention probabilities (math kernel)", e * a * seq, f"{e:g}·a·s")]
    # transformers' Falcon hands SDPA one K/V head without enable_gqa and a materialised mask: per head and key,
    # _safe_softmax's softmax output, the masked copy the second matmul saves, and a 1-byte mask: 2·e + 1 bytes
    # (validation/measured.json, falcon-7b 4L: 5.0 bytes measured at bf16).
    return [Term("q (scaled)", e * q, "e·a·d"),
            Term("k, v (expanded)", 2 * e * q, "2·e·a·d"),
            Term("attention probabilities (math kernel)", (2 * e + 1) * a * seq, f"(2·{e:g} + 1)·a·s")]


def _attention_terms(arch: "Architecture", e: float, amp: bool, attention: str, recompute: str,
                     seq: int) -> "list[Term]":
    q, kv, a = arch.q_dim, arch.kv_dim, arch.heads
    # transformers' sdpa_attention_forward passes grouped-query K/V to SDPA as they are (enable_gqa) when
    # there is no attention mask and the head size is at most 256 (integrations/sdpa_attention.py,
    # use_gqa_in_sdpa, v5.23); CUDA's flash kernel then saves one K/V head per group. attention=flash-repeat
    # is the other path: K/V expanded to every head first (a padding mask, CPU's SDPA, torchtune's attention).
    native_gqa = attention == "flash" and arch.dim_head <= 256 and not arch.sdpa_math
    repeated = arch.kv_heads != arch.heads and not native_gqa
    k_saved = q if repeated else kv
    k_formula = "a·d" if repeated else "k·d"
    terms: "list[Term]" = []
    if recompute == "selective":
        # Only the core's inputs (before repeat_kv) and its output survive the forward.
        return [Term("q, k, v (core inputs)", (4 if amp else e) * q + 2 * e * kv, "e·q + 2·e·k·d"),
                Term("attention output", e * q, "e·a·d"),
                Term("o_proj input", e * q, "e·a·d", feeds="o")]
    if attention == "flash-math" or (attention in ("flash", "flash-repeat") and arch.sdpa_math):
        terms += _math_kernel_terms(arch, e, attention, seq)
    elif attention in ("flash", "flash-repeat"):
        terms += [Term("q (rotated)", e * q, "e·a·d"),
                  Term("k, v (repeated for GQA)" if repeated else "k, v", 2 * e * k_saved, f"2·e·{k_formula}"),
                  Term("attention output", e * q, "e·a·d"),
                  Term("logsumexp", 4 * a, "4·a")]
    else:
        # Llama-style eager attention takes softmax in fp32 and casts back; GPT-2 and BERT take it in
        # the scores' dtype. Autocast feeds the second matmul a 16-bit copy. Dropout keeps a 1-byte mask
        # and its output; without dropout the matmul keeps the probabilities themselves.
        softmax_bytes = 4 if (amp or arch.softmax_fp32) else e
        probs_bytes = 2 if amp else e
        terms += [Term("q", e * q, "e·a·d"),
                  Term("k (repeated)" if repeated else "k", e * k_saved, f"e·{k_formula}"),
                  Term("softmax output", softmax_bytes * a * seq, f"{softmax_bytes:g}·a·s"),
                  *([Term("score soft-capping tanh", e * a * seq, f"{e:g}·a·s")] if arch.attn_softcap else []),
                  Term("v (repeated)" if repeated else "v", e * k_saved, f"e·{k_formula}")]
        if arch.attention_dropout:
            terms.append(Term("attention dropout mask and output", (1 + probs_bytes) * a * seq,
                              f"(1 + {probs_bytes:g})·a·s"))
        elif probs_bytes != softmax_bytes:
            terms.append(Term("probabilities cast", probs_bytes * a * seq, f"{probs_bytes:g}·a·s"))
    terms.append(Term("o_proj input", e * q, "e·a·d", feeds="o"))
    if arch.attn_output_gate:       # Qwen3-Next: attention output · sigmoid(gate): the gate and its sigmoid kept
        terms.append(Term("output gate and its sigmoid", 2 * e * q, "2·e·a·d"))
    if arch.qk_norm != "none":
        terms += _qk_norm_terms(arch, e, amp)
    if arch.attention == "mla":
        terms += _mla_terms(arch, e, amp)
    return terms


def _mlp_terms(arch: "Architecture", e: float, amp: bool = False) -> "list[Term]":
    # Routed experts are expert_ffn wide (Qwen3-MoE's moe_intermediate_size); each token passes k of them.
    f = (arch.expert_ffn or arch.ffn) if arch.experts else arch.ffn
    tokens = arch.routed_per_token if arch.experts else 1
    if arch.mlp == "gated":
        terms = [Term("gate, up", 2 * e * f * tokens, "2·e·f"),
                 Term("activation output", e * f * tokens, "e·f"),
                 Term("down_proj input", e * f * tokens, "e·f", feeds="down")]
    elif arch.activation == "gelu_new" and amp:
        # GPT-2's NewGELU written out in Python under CUDA autocast: pow runs in fp32, so x is cast to fp32
        # and tanh and 1 + tanh stay fp32; only 0.5·x is 16-bit (validation/measured.json, gpt2 amp cases).
        terms = [Term("fc output and GELU intermediates (fp32 under autocast)", 14 * f, "(4 + 4 + 4 + 2)·f"),
                 Term("proj input", e * f, "e·f", feeds="down")]
    elif arch.activation == "gelu_new":
        # GPT-2's NewGELU is written out in Python; autograd keeps four f-sized intermediates.
        terms = [Term("fc output and GELU intermediates", 4 * e * f, "4·e·f"),
                 Term("proj input", e * f, "e·f", feeds="down")]
    else:
        terms = [Term("fc output", e * f, "e·f"), Term("proj input", e * f, "e·f", feeds="down")]
    if arch.activation == "xielu":
        # transformers 5.24 XIELUActivation._xielu_python (what runs without the xielu CUDA package): autograd keeps
        # three more e·f intermediates of its where() branches and the x > 0 mask (a byte each)
        terms.append(Term("xIELU intermediates and mask", 3 * e * f + f, "3·e·f + f"))
    if arch.experts:
        # each routed expert gathers its tokens' inputs and returns weighted outputs (index_add)
        terms += [Term("router logits and weights", 4 * 3 * arch.experts, "12·E"),
                  Term("expert inputs and weighted outputs", 2 * e * arch.hidden * tokens, "2·e·h·k")]
        if arch.shared_width:
            s = arch.shared_width
            terms += [Term("shared expert gate, up, activation, down input", 4 * e * s, "4·e·f_shared")]
    return terms


def op_terms(arch: "Architecture", e: float, attention: str) -> "list[Term]":
    """What torchtitan's selective activation checkpointing by op keeps of a layer (recompute=op).

    pytorch/torchtitan torchtitan/distributed/activation_checkpoint.py@v0.2.2 ``_custom_policy``: inside each
    checkpointed block the outputs of the ops on ``_save_list`` are saved (aten.mm, the SDPA kernels and
    their logsumexp, reduce-scatters), except every second mm, counted per block; everything else is
    recomputed, and the block's input is kept to recompute from. A Llama block's matmuls run q, k, v, o, then
    w1 (gate), w3 (up), w2 (down): the 1st, 3rd, 5th and 7th outputs stay.
    """
    if arch.mlp != "gated" or arch.experts or arch.qkv_bias or arch.out_bias or arch.mlp_bias:
        raise FieldError("recompute", "op (torchtitan's selective checkpointing by op) is modelled for dense, "
                         "bias-free gated-MLP blocks (Llama-style), whose matmuls are aten.mm; use layer or full")
    terms = [Term("block input (kept to recompute from)", e * arch.hidden, "e·h", replicated=True),
             Term("q projection output (1st matmul)", e * arch.q_dim, "e·a·d"),
             Term("v projection output (3rd matmul)", e * arch.kv_dim, "e·k·d")]
    if attention in ("flash", "flash-repeat"):
        terms.append(Term("attention output and logsumexp (SDPA)", e * arch.q_dim + 4 * arch.heads, "e·a·d + 4·a"))
    terms += [Term("gate projection output (5th matmul)", e * arch.ffn, "e·f"),
              Term("down projection output (7th matmul)", e * arch.hidden, "e·h")]
    return terms


def layer_terms(arch: "Architecture", policy: "Policy", attention: str, recompute: str, seq: int,
                fused: bool = False, hf_model: bool = True) -> list[Term]:
    """Saved tensors of one layer (bytes per token), without full recomputation. ``hf_model``: transformers' model
    code runs (its SDPA masks; not torchtune's, torchtitan's or Megatron's own)."""
    e = policy.bytes("act")
    amp = policy.autocast
    if recompute == "op":
        return op_terms(arch, e, attention)
    # layers that differ: a hybrid's mixers, MLP-less blocks, an MoE's dense layers (Llama 4's moe_layers)
    masks = _window_mask_terms(arch, e, attention, recompute, seq) if hf_model else []
    if any(m in STATEFUL or m == "-" for m in arch.layer_pattern) or "-" in arch.mlp_pattern or \
            (arch.experts and "D" in arch.mlp_pattern):
        return _mixed_layer_terms(arch, e, amp, attention, recompute, seq, fused) + masks
    terms = _norm_terms(arch, e, amp, 3 if arch.norm == "rmsnorm" else 1, "attention norm", "qkv")
    terms += _attention_mix(arch, e, amp, attention, recompute, seq)
    if arch.norms_per_layer == 4:           # Gemma 2/3: norms on the attention and MLP outputs too
        terms += _norm_terms(arch, e, amp, 0, "post-attention norm")
    terms += _norm_terms(arch, e, amp, 2 if arch.mlp == "gated" else 1, "MLP norm", "gate_up")
    terms += _mlp_terms(arch, e, amp)
    if arch.norms_per_layer == 4:
        terms += _norm_terms(arch, e, amp, 0, "post-MLP norm")
    if arch.dropout:
        terms.append(Term("residual dropout masks", 2 * arch.hidden, "2·h", replicated=True))
    return terms + masks


def _attention_mix(arch: "Architecture", e: float, amp: bool, attention: str, recompute: str,
                   seq: int) -> "list[Term]":
    """The attention terms of the average layer: under flash-math, the math kernel's in the layers SDPA gets no mask
    and flash-repeat's (K/V expanded, the memory-efficient kernel) in the windowed layers past their window."""
    share = math_share(arch, seq) if attention == "flash-math" else 1.0
    if share == 1.0:
        return _attention_terms(arch, e, amp, attention, recompute, seq)
    full, windowed = window_layers(arch, 0, arch.layers)["full"], arch.layers - round(share * arch.layers)
    return [replace(t, name=f"{t.name} ({n} of {arch.layers} layers)", bytes_per_token=t.bytes_per_token * part)
            for kernel, part, n in (("flash-math", share, full), ("flash-repeat", 1 - share, windowed)) if part
            for t in _attention_terms(arch, e, amp, kernel, recompute, seq)]


def _window_mask_terms(arch: "Architecture", e: float, attention: str, recompute: str, seq: int) -> "list[Term]":
    """A sliding or chunked layer's mask as SDPA keeps it for backward: transformers hands SDPA a bool mask once
    the sequence reaches the window (full layers run is_causal, with none), SDPA converts it to a float mask in the
    query's dtype at each call and its kernel saves that (b·s² of e bytes a layer: e·s a token; the live tensors of
    validation/measure_families.py's olmo3 training case, 1,024 bytes a token in each sliding layer at s = 512).
    Averaged over the layers: only the windowed ones keep one. Eager attention adds the mask to scores it keeps
    anyway; a recomputed core keeps nothing."""
    if not arch.sliding_window or seq < arch.sliding_window or recompute == "selective" or \
            attention not in ("flash", "flash-repeat", "flash-math") or not arch.layers:
        return []
    kinds = window_layers(arch, 0, arch.layers)
    windowed = kinds["sliding"] + kinds["chunked"]
    if not windowed:
        return []
    return [Term("sliding-window mask (SDPA's float copy)", e * seq * windowed / arch.layers,
                 f"e·s·{windowed}/{arch.layers} (windowed layers of all)")]


def _mixed_layer_terms(arch: "Architecture", e: float, amp: bool, attention: str, recompute: str,
                       seq: int, fused: bool) -> "list[Term]":
    """A hybrid's layers by kind (pycore/model/mixers.py), each kind's terms weighted by its share of the layers
    so that they add up to the average layer: attention layers as a transformer's, state-space and convolution
    mixers as pycore.memory.scan_activations measured them, and each layer's MLP as its kind (none for
    Nemotron-H's mixer-only blocks and Mamba-2's)."""
    terms: "list[Term]" = []
    for (mixer, mlp), (count, _) in layer_kinds(arch).items():
        share = count / arch.layers
        kind: "list[Term]" = []
        if mixer != "-":
            kind += _norm_terms(arch, e, amp, 3 if mixer in "ASCP" else 1, "mixer norm", "qkv")
        if mixer in "ASCP":
            masked = attention == "flash-math" and mixer in "SC" and arch.sliding_window and seq >= arch.sliding_window
            kind += _attention_terms(arch, e, amp, "flash-repeat" if masked else attention, recompute, seq)
        if mixer in STATEFUL:
            padded = scan_activations.padding(arch, mixer, seq, fused)
            kind.append(Term(f"{MIXERS[mixer]} saved tensors ({'fused' if fused else 'reference'} kernels)",
                             mixer_saved(arch, mixer, e, amp, fused) * padded,
                             "the kernels' source" if fused else "validation/measure_hybrid.py fit" +
                             (f" × {padded:.3g} (the sequence padded to whole chunks)" if padded != 1 else "")))
        if mlp != "-":
            if arch.norms_per_layer > 1 or mixer == "-":
                kind += _norm_terms(arch, e, amp, 2 if arch.mlp == "gated" else 1, "MLP norm", "gate_up")
            kind += _mlp_terms(arch if mlp == "E" else _dense(arch), e, amp)
        terms += [replace(t, name=f"{t.name} ({count} of {arch.layers} layers)",
                          bytes_per_token=t.bytes_per_token * share, kind=mixer + mlp) for t in kind]
    if arch.dropout:
        terms.append(Term("residual dropout masks", 2 * arch.hidden, "2·h", replicated=True))
    return terms


def _dense(arch: "Architecture") -> "Architecture":
    """The architecture as its dense layers see it: no routed experts, the dense width."""
    return replace(arch, experts=0, experts_per_token=0, mlp_pattern="", ffn=arch.dense_ffn or arch.ffn,
                   shared_experts=0, shared_expert_ffn=0)


def layer_input_bytes(arch: "Architecture", policy: "Policy") -> float:
    """Bytes per token of one layer's input, what full recomputation keeps."""
    return (4 if policy.autocast else policy.bytes("act")) * arch.hidden


def korthikanti(arch: "Architecture", batch: int, seq: int, recompute: str, act_bytes: float, tp: int = 1, sp: bool = False) -> float:
    """Korthikanti et al. 2022 eq. (1)-(2) and Table 2, scaled from 16-bit to ``act_bytes`` per element.

    Per layer: sbh(34 + 5as/h) with no parallelism; sbh(10 + 24/t + 5as/(ht)) with tensor parallelism;
    sbh(34/t + 5as/(ht)) with sequence parallelism too. Selective recompute drops the 5as/h term; full
    recompute keeps the layer input, 2sbh (2sbh/t with sequence parallelism).
    """
    sbh = seq * batch * arch.hidden
    scores = 0 if recompute == "selective" else 5 * arch.heads * seq / (arch.hidden * tp)
    if recompute == "full":
        per_layer = 2 * sbh / (tp if sp else 1)
    elif sp:
        per_layer = sbh * (34 / tp + scores)
    else:
        per_layer = sbh * (10 + 24 / tp + scores)
    return round(per_layer * act_bytes / 2 * arch.layers)


@remembered(lambda setup: (setup.arch, setup.policy, setup.finetune, setup.workload.attention, setup.workload.hf_model,
                           setup.workload.recompute, setup.workload.seq, setup.workload.scan_kernels,
                           setup.layout.tp, setup.layout.sp))           # all it reads
def per_token(setup: "Setup") -> PerToken:
    """(saved bytes per token per layer, terms, final-norm bytes per token, working bytes per token).

    With tensor parallelism the terms inside the parallel region split t ways, and the norm and residual
    terms too with sequence parallelism (Korthikanti et al. 2022, section 4.2). Remembered: the answers'
    searches ask again with only the batch, the data or pipeline parallelism changed.
    """
    arch, policy, work, lay = setup.arch, setup.policy, setup.workload, setup.layout
    e = policy.bytes("act")
    attention = work.attention
    terms = layer_terms(arch, policy, attention, work.recompute, work.seq, work.scan_kernels == "fused", work.hf_model)
    if setup.finetune.adapters:
        terms = _adapter_terms(setup, terms)

    def split(t: Term) -> float:
        return t.bytes_per_token / (lay.tp if (not t.replicated or lay.sp) else 1)
    per_layer: float = sum(split(t) for t in terms)
    if arch.kind == "encoder-decoder":
        # Approximation, not yet measured: decoder blocks as encoder blocks plus one more attention
        # block (cross-attention), target as long as the source.
        cross: float = sum(split(t) for t in _attention_terms(arch, e, policy.autocast, attention, work.recompute,
                                                         work.seq))
        per_layer = (per_layer * (arch.layers + arch.decoder_layers) + cross * arch.decoder_layers) / arch.layers
    final: float = sum(split(t) for t in _norm_terms(arch, e, policy.autocast, 1, "final norm"))
    width = max(arch.ffn * arch.routed_per_token, arch.q_dim) / lay.tp
    working = 3 * e * width
    if holds_scores(arch, attention, work.seq):
        working += (4 + e) * arch.heads / lay.tp * work.seq
    working = max(working, scan_activations.backward_working(arch, work.scan_kernels == "fused") / lay.tp)
    return _recomputed(setup, per_layer, terms, final, working)


def _adapter_terms(setup: "Setup", terms: "list[Term]") -> "list[Term]":
    """A layer's saved tensors with the base frozen and PEFT's LoRA beside it (validation/measured_lora.json).

    Frozen weights need no gradient, so nothing keeps the inputs that only their gradients read: the frozen
    linear layers' inputs and the normalised tensor a norm's weight multiplies (the terms that feed them go).
    What the adapters keep is pycore.memory.finetune.adapter_saved. Nothing before the first adapted layer needs
    a gradient (the embedding is frozen), so the first layer's input norm keeps nothing, nor the dropout masks
    of q, k and v there: those terms count in L - 1 of L layers. transformers' gradient_checkpointing_enable
    makes the embedding's output require grad (modeling_utils.py, enable_input_require_grads), and so does
    QLoRA's prepare_model_for_kbit_training: with full recompute or QLoRA every layer counts."""
    from pycore.memory import finetune
    from pycore.memory.precision import BITS
    arch, policy, ft, work = setup.arch, setup.policy, setup.finetune, setup.workload
    amp, dropout = policy.autocast, ft.dropout > 0  # PEFT's lora_dropout (LoraConfig's default 0.0)
    saved = finetune.adapter_saved(arch, ft.rank, ft.targets, BITS[ft.dtype] / 8, policy.bytes("act"), amp, dropout)
    first = ft.method == "lora" and work.recompute != "full"
    share = (arch.layers - 1) / arch.layers if first else 1.0
    out = [_frozen_short_conv(t, amp) if t.name.startswith(MIXERS["V"]) else t for t in terms if not t.feeds]
    if first and any(t.kind for t in out):
        out = _before_the_first_adapter(arch, ft.targets, out)
    elif first:
        out = [replace(t, bytes_per_token=t.bytes_per_token * share, formula=f"{t.formula}·(L − 1)/L")
               if t.name.startswith("attention norm") else t for t in out]
    # SDPA's output, kept by SDPA itself, is what o_proj reads: lora_A reading it uncopied adds nothing
    fused_o = work.attention in ("flash", "flash-repeat") and work.recompute != "selective"
    names = {"qkv": "q, k, v input (a norm's output)", "o": "o_proj input", "gate_up": "gate, up input (a norm's "
             "output)", "down": "down_proj input"}
    for group, (size, formula) in saved.shared.items():
        if not (group == "o" and fused_o):
            out.append(Term(f"LoRA: {names[group]}, kept uncopied by lora_A", size, formula,
                            replicated=group in ("qkv", "gate_up")))
    if saved.copies:
        out.append(Term("LoRA: lora_A's copies of its input, one per adapted layer", saved.copies, saved.copies_formula))
    if saved.masks:
        masks = saved.masks - saved.first_masks * (1 - share)
        out.append(Term("LoRA: dropout masks, one per adapted layer", masks, saved.masks_formula))
    out.append(Term("LoRA: lora_A outputs (kept by lora_B)", saved.a_outputs, saved.a_formula))
    if ft.dora:
        kept = finetune.dora_outputs(arch, ft.targets, BITS[ft.dtype] / 8, policy.bytes("act"), amp)
        out.append(Term("DoRA: the base layer's and lora_B's outputs, one each per adapted layer", kept,
                        "(2 + 2)·Σ out" if amp else f"({policy.bytes('act'):g} + {BITS[ft.dtype] / 8:g})·Σ out"))
    return out


def _before_the_first_adapter(arch: "Architecture", targets: str, terms: "list[Term]") -> "list[Term]":
    """A hybrid's terms by layer kind with nothing kept before the first adapted layer (no input there needs a
    gradient): the layers before it keep nothing, and the first one's mixer norm nothing (its input needs none).
    With q and v targets a hybrid's first adapted layer is its first attention layer (LFM2's third)."""
    from pycore.memory import finetune
    chosen = finetune.TARGETS[targets]
    adapted = [index for index in range(arch.layers)
               if (mixer_at(arch, index) in ATTENTION and {"q", "k", "v", "o"} & set(chosen))
               or (mlp_at(arch, index) != "-" and {"gate", "up", "down"} & set(chosen))]
    if not adapted:
        return terms
    first = adapted[0]
    kinds = layer_kinds(arch)
    before: "dict[str, int]" = {}
    for index in range(first):
        key = mixer_at(arch, index) + mlp_at(arch, index)
        before[key] = before.get(key, 0) + 1
    first_kind = mixer_at(arch, first) + mlp_at(arch, first)
    out = []
    for term in terms:
        count = kinds[(term.kind[0], term.kind[1])][0] if term.kind else 0
        gone = before.get(term.kind, 0) + (term.kind == first_kind and term.name.startswith("mixer norm"))
        if not count or not gone:
            out.append(term)
            continue
        out.append(replace(term, bytes_per_token=term.bytes_per_token * (count - gone) / count,
                           formula=f"{term.formula}·({count} − {gone})/{count} (none before the first adapted layer)"))
    return out


def _frozen_short_conv(term: Term, amp: bool) -> Term:
    """LFM2's short convolution with its weights frozen (transformers 5.24 Lfm2ShortConv.slow_forward: in_proj, B·x,
    conv, C·conv_out, out_proj): the frozen conv keeps no input (its weight takes no gradient), nor the frozen
    out_proj its input y, so of the 6·h (7·h·2 bytes under autocast) the layer saves, B·x and y go: 4·h
    (5·h·2 under autocast, not measured). validation/measure_vl.py's lfm2_vl LoRA case."""
    kept, full = (5, 7) if amp else (4, 6)
    return replace(term, bytes_per_token=term.bytes_per_token * kept / full,
                   formula=f"{term.formula} × {kept}/{full} (frozen conv and out_proj keep no input)")


def _recomputed(setup: "Setup", per_layer: float, terms: "list[Term]", final: float, working: float) -> PerToken:
    """What a recompute mode keeps of the saved ``per_layer`` bytes, and the layer it rebuilds in backward."""
    recompute, lay = setup.workload.recompute, setup.layout
    layer_input = layer_input_bytes(setup.arch, setup.policy) / (lay.tp if lay.sp else 1)
    if recompute == "full":
        return layer_input, terms, final, working + per_layer      # one layer rebuilt during its backward
    if recompute == "layer":
        # torchtitan selective_ac_option = "2" (activation_checkpoint.py@v0.2.2 _apply_layer_sac): every 2nd
        # block is checkpointed whole (its input kept, rebuilt in its backward), the others keep everything.
        return (per_layer + layer_input) / 2, terms, final, working + per_layer
    if recompute == "op":
        everything = sum(t.bytes_per_token for t in layer_terms(
            setup.arch, setup.policy, setup.workload.attention, "none", setup.workload.seq)) / lay.tp
        return per_layer, terms, final, working + everything         # the block's other ops rebuilt
    return per_layer, terms, final, working


def whole_model(setup: "Setup", tokens: int) -> float:
    """Activation bytes of the whole model under the korthikanti, multiplier or per-sample models."""
    arch, work, lay = setup.arch, setup.workload, setup.layout
    e = setup.policy.bytes("act")
    model = work.activation_model
    if work.recompute in ("op", "layer") and model != "detailed":
        raise FieldError("recompute", f"{work.recompute} (torchtitan's selective checkpointing) is modelled "
                         "term by term: use activations=auto with a preset or config, or recompute=selective or full")
    if model == "none":             # a bare parameter count: activations not counted (said in warnings)
        return 0
    if model == "detailed":         # a generic preset with measured bytes per sample
        per_sample = arch.act_per_sample_fp32 if e == 4 else arch.act_per_sample_16
        return per_sample * work.batch
    needs = {"korthikanti": ("layers", "hidden", "heads"), "multiplier": ("layers", "hidden")}.get(model, ())
    for key in needs:
        if not getattr(arch, key):
            raise FieldError(key, f"the {model} activation model needs {', '.join(needs)}; give {key}")
    if model == "korthikanti":
        return korthikanti(arch, work.batch, work.seq // lay.cp, work.recompute, e, lay.tp, lay.sp)
    if model == "multiplier":
        return round(tokens * arch.hidden * arch.layers * work.act_multiplier * e / lay.tp)
    return work.act_per_sample * work.batch
