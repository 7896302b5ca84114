"""Serving on one GPU of a tensor/pipeline/expert-parallel layout, with transformers or vLLM.

transformers ``generate()`` (engine=hf): weights, the KV cache at its final length (prompt + new tokens
− 1; the last token is never cached), and the larger of the prefill working set and the decode step
(DynamicCache appends with torch.cat, so one layer's keys and values exist twice for a moment).

vLLM (engine=vllm) pre-allocates: it takes ``gpu_util`` of the GPU's memory, subtracts the weights, the
memory outside PyTorch and the activation peak of a profiling run at ``max_batched_tokens``, and gives
the rest to the paged KV cache in blocks of 16 tokens (vllm/v1/worker/gpu_worker.py
``determine_available_memory``; vllm/v1/core/kv_cache_utils.py).

Per GPU: tensor parallelism splits the attention and MLP matrices and the vocabulary-parallel embedding
and head t ways (norms replicated), and the KV cache by key/value heads — replicated when there are fewer
kv heads than t, as vLLM does; multi-head latent attention caches one latent per token on every rank.
Pipeline stages hold their own layers and their own layers' cache; expert parallelism splits the routed
experts.
"""

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pycore.base.expr import Q, ceil, floor, maximum, num, rnd, split, sym
from pycore.base.units import GIB
from pycore.memory import parallel, vision_activations, vllm_multimodal
from pycore.memory.activations import eager_working, holds_scores
from pycore.memory.device import blas_workspaces
from pycore.memory.model_states import stored_weights, weight_symbols, weights_source
from pycore.memory.pools import Pool, StageResult, make, peak_of, worst_stage
from pycore.memory.recurrent import SYMBOLS as STATE_SYMBOLS
from pycore.memory.recurrent import has_state, state_per_sequence, vllm_pages
from pycore.memory.scan_activations import prefill_transient
from pycore.memory.setup import Setup, Workload
from pycore.model.architecture import count_parameters, layer_params
from pycore.model.catalog import gpus as gpu_catalog
from pycore.model.mixers import window_layers

if TYPE_CHECKING:
    from pycore.model.architecture import Architecture

# vLLM runs on Apple silicon only on its CPU (docs.vllm.ai, Installation, CPU: "experimental support for macOS with
# Apple Silicon ... the CPU implementation"); its Metal plugin, vllm-metal, computes on MLX, which is not modelled
NO_METAL = "vLLM has no Metal backend: on Apple silicon it runs on the CPU (the vllm-metal plugin runs on MLX, " \
    "not modelled here)"
MOMENTS = ("prefill", "decode")
VLLM_MOMENTS = ("serving",)
BLOCK_TOKENS = 16               # vLLM's default block size (CacheConfig.block_size)
# Memory outside PyTorch's allocator that vLLM's profiler subtracts: cuBLAS/NCCL workspaces and the like
# measured as an increase over the start-up baseline; with tp > 1 NCCL's buffers add to it.
# vLLM >= 0.11 measures it as the increase over a start-up snapshot taken after the CUDA context and NCCL
# exist (vllm/v1/worker/gpu_worker.py, vllm/utils memory_profiling), so neither is charged here.
VLLM_NON_TORCH = 256 * 2**20


def cached_layers(arch: "Architecture", first: int, count: int, tokens: int, windowed: bool = True) -> Q:
    """Token-layers cached by layers ``first`` .. ``first + count - 1`` for a sequence of ``tokens``.

    Sliding-window layers (Mistral 7B v0.1; Gemma 2 every other layer; Gemma 3 five layers in six) and
    chunked-attention layers (Llama 4) keep at most the window; full-attention layers keep every token; the
    state-space, linear-attention and convolution layers of a hybrid keep none (their state is
    pycore.memory.recurrent's). ``windowed=False``: the window layers hold every token too, as transformers'
    DynamicSlidingWindowLayer does after the prefill (cache_utils.py, 5.24: ``self.keys = full_key_states[:, :,
    -sliding_window + 1:, :]`` is a view that keeps the whole prompt's storage until the next token's update).
    """
    if not arch.layer_pattern and not arch.sliding_window:
        return sym("Ls", count) * sym("n", tokens)
    kinds = window_layers(arch, first, count)
    local = kinds["sliding"] + kinds["chunked"]
    cached = sym("Lg", kinds["full"]) * sym("n", tokens)
    if not local:
        return cached
    return cached + sym("Lw", local) * (sym("min(n, W)", min(tokens, arch.sliding_window)) if windowed else
                                        sym("n", tokens))


def kv_values_per_token(arch: "Architecture", engine: str, tp: int) -> Q:
    """Cached values per token and layer on one GPU.

    Grouped-query and multi-query attention cache keys and values of kv_heads heads; with tensor
    parallelism each GPU keeps ceil(kv_heads / t) of them (one replicated head when kv_heads < t, vLLM's
    ``get_num_kv_heads``). Multi-head latent attention: vLLM and SGLang cache the compressed latent and
    the shared rotary key (kv_lora_rank + qk_rope_dim, the same on every rank); transformers caches the
    decompressed keys (heads × (nope + rope)) and values (heads × v_head_dim), split by t.
    """
    if arch.attention == "mla":
        if engine == "vllm":
            return sym("r_kv", arch.kv_lora_rank) + sym("d_rope", arch.qk_rope_dim)
        per_head = arch.qk_nope_dim + arch.qk_rope_dim + arch.v_head_dim
        return split(sym("a", arch.heads), "t", tp) * sym("d_qk+d_v", per_head)
    return num(2) * split(sym("k", arch.kv_heads), "t", tp) * sym("d", arch.dim_head)


def kv_cache_bytes(arch: "Architecture", tokens: int, kv_bytes: float, engine: str = "hf", tp: int = 1,
                   windowed: bool = True) -> float:
    """KV-cache bytes of one sequence of ``tokens`` tokens over the whole model, on one tensor-parallel rank;
    ``windowed=False``: a cache one forward built, whose sliding layers still hold every token (cached_layers)."""
    return rnd(kv_values_per_token(arch, engine, tp) * cached_layers(arch, 0, arch.layers, tokens, windowed)
               * kv_bytes).value


def serving(setup: Setup, gpu: "Mapping[str, Any]") -> StageResult:
    """Pools and moments of serving on the worst pipeline stage (every stage's summary when pp > 1)."""
    stages = parallel.stages(setup.arch, setup.layout)
    first = 0
    results = []
    for stage in stages:
        results.append(_stage(setup, stage, first, gpu))
        first += stage.layers
    # vLLM sizes every stage's cache alike and keeps the fewest blocks any stage can hold (its engine core takes
    # the smallest num_blocks of the workers' KV cache configs): the binding stage holds the fewest tokens.
    return worst_stage(results, _fewest_tokens if setup.workload.engine == "vllm" else None)


def _fewest_tokens(result: StageResult) -> float:
    kv = next((p.bytes for p in result["pools"] if p.key == "kv_cache"), 0)
    per_token = result.get("kv_bytes_per_token") or 0
    return -(kv / per_token) if per_token else -kv


WEIGHT_SYMBOLS = "P = parameters; S = parameters on this GPU (tensor/pipeline/expert part); Pq = parameters " \
                 "in quantized matrices; bits = bits per quantized weight"
KV_SYMBOLS = ("k = key/value heads; t = tensor-parallel degree; d = head size; Ls = layers on this GPU; "
              "n = tokens per sequence; Lg/Lw = full/sliding-window layers; W = window; B = sequences")


def mtp_layers(setup: Setup, stage: parallel.Stage) -> int:
    """The multi-token-prediction layers vLLM loads on this stage (the last) with speculative=mtp, else 0."""
    on = setup.workload.engine == "vllm" and setup.workload.speculative == "mtp" and stage.has_head
    return setup.arch.mtp_layers if on else 0


def _mtp_weights(setup: Setup, stage: parallel.Stage) -> "Pool | None":
    """The MTP layers' weights vLLM 0.11 keeps, loaded by v1/spec_decode/eagle.py, which shares the target's
    embedding (one pipeline stage) and, for method mtp, points the drafter's top-level lm_head at the target's.
    deepseek_mtp.py / glm4_moe_mtp.py: per layer enorm, hnorm, eh_proj (2h -> h), a decoder layer like the
    model's last, and shared_head's norm and own vocabulary-parallel head (not top-level: kept).
    qwen3_next_mtp.py: fc (2h -> h), pre_fc_norm_hidden, pre_fc_norm_embedding and norm, and a full-attention
    decoder layer with the model's experts; its lm_head is the target's."""
    arch, lay = setup.arch, setup.layout
    count = mtp_layers(setup, stage)
    if not count:
        return None
    h = arch.hidden
    if "L" in arch.layer_pattern:
        attention_layer = arch.layer_pattern.index("A")
        per_layer = layer_params(arch, attention_layer, lay.tp, lay.ep) + -(-(2 * h * h) // lay.tp) + 3 * h
        source, what = "vllm/model_executor/models/qwen3_next_mtp.py Qwen3NextMultiTokenPredictor (vLLM 0.11)", \
            "a full-attention decoder layer, fc, norms; the head is the target's"
    else:
        per_layer = layer_params(arch, arch.layers - 1, lay.tp, lay.ep) + -(-(2 * h * h) // lay.tp) + 3 * h + \
            -(-(arch.vocab * h) // lay.tp)
        source, what = "vllm/model_executor/models/deepseek_mtp.py DeepSeekMultiTokenPredictorLayer (vLLM 0.11)", \
            "a decoder layer, eh_proj, norms, its head"
    q = sym("Lmtp", count) * sym("Pm", per_layer) * setup.policy.bytes("weight")
    return make("mtp_weights", "MTP layers (speculative decoding)", q, VLLM_MOMENTS, source,
                f"Lmtp = MTP layers (num_nextn_predict_layers); Pm = one MTP layer's parameters on this GPU ({what})")


def _draft_weights(setup: Setup) -> "Pool | None":
    """A draft model's weights (speculative=draft), loaded by vllm/v1/spec_decode/draft_model.py (vLLM main, 2026:
    DraftModelProposer.load_model, get_model with the draft's own ModelConfig in the target's dtype) over the target's
    tensor-parallel GPUs; its attention layers are registered beside the target's, so they take KV cache blocks too."""
    if not setup.draft:
        return None
    tp, params = setup.layout.tp, count_parameters(setup.draft).total
    q = ceil(sym("Pd", params) / sym("t", tp)) * setup.policy.bytes("weight")
    return make("draft_weights", f"Draft model weights ({setup.draft.name})", q, VLLM_MOMENTS,
                "vllm/v1/spec_decode/draft_model.py DraftModelProposer.load_model (vLLM main, 2026)",
                "Pd = the draft model's parameters; t = tensor-parallel degree (the draft's is the target's)")


def _stage(setup: Setup, stage: parallel.Stage, first_layer: int, gpu: "Mapping[str, Any]") -> StageResult:
    """The pools of one pipeline stage, whose layers start at ``first_layer``, under the chosen engine."""
    work = setup.workload
    stored = stored_weights(setup, stage)
    mtp = mtp_layers(setup, stage)
    per_token = rnd(kv_values_per_token(setup.arch, work.engine, setup.layout.tp)
                    * (cached_layers(setup.arch, first_layer, stage.layers, 1) + sym("Lmtp", mtp))
                    * setup.policy.bytes("kv"))
    if setup.draft and work.engine == "vllm":
        # the draft's attention layers join the target's KV cache: every block holds both models' keys and values
        per_token = per_token + rnd(kv_values_per_token(setup.draft, "vllm", setup.layout.tp)
                                    * sym("Ld", setup.draft.layers) * setup.policy.bytes("kv"))
    moments: "tuple[str, ...]"
    state, pages = 0, None
    if work.engine == "vllm":
        state = int(rnd(state_per_sequence(setup.arch, first_layer, stage.layers, "vllm", setup.layout.tp,
                                           setup.policy.bytes("act"))).value)
        pages = vllm_pages(setup.arch, first_layer, stage.layers, setup.layout.tp,
                           (setup.policy.bytes("kv"), setup.policy.bytes("act")), work.max_batched_tokens, mtp)
        pools, available = _vllm_pools(setup, stage, gpu, stored, per_token, pages)
        moments = VLLM_MOMENTS
    else:
        pools = _hf_pools(setup, stage, first_layer, stored)
        moments = hf_moments(pools)
    peak = peak_of(pools, moments)
    result: StageResult = {
        "tokens": work.batch * work.seq, "layers": stage.layers, "stage": stage.index,
        "params_per_gpu": stage.params, "activation_terms": [], "host": [], "host_bytes": 0,
        "kv_bytes_per_token": int(per_token.value), "pools": pools,
        "state_bytes_per_sequence": state,
        "moments": peak["moments"], "phases": peak["phases"], "peak_moment": peak["peak_moment"],
        "peak_phase": peak["peak_phase"], "peak_bytes": peak["peak_bytes"]}
    if pages:
        result["vllm_pages"] = pages
    if work.engine == "vllm":
        result["vllm_available"] = available
    return result


def _weights(setup: Setup, stored: Q, moments: "tuple[str, ...]", unbuilt: bool = False) -> Pool:
    """The weights in their storage format (quantized or the policy's dtype), all through serving; ``unbuilt``: less
    the vision tower's parameters vLLM does not build (pycore.memory.vllm_multimodal.unbuilt_weights)."""
    label = f"Weights ({'checkpoint' if setup.weight_bytes else setup.quant if setup.quant != 'none' else setup.policy.weight})"
    return make("weights", label, stored, moments, weights_source(setup, "parameters counted layer by layer") +
                (f"; {vllm_multimodal.UNBUILT_SOURCE}" if unbuilt else ""),
                weight_symbols(setup, WEIGHT_SYMBOLS) +
                ("; Pu = the tower's parameters vLLM does not build (the blocks past the feature layer and the "
                 "post-LayerNorm); t = tensor-parallel degree" if unbuilt else ""))


def _widest(arch: "Architecture", engine: str = "hf", e: float = 2) -> float:
    """Elements per token of one layer's widest intermediate: the MLP's (its routed experts' together: every one
    where transformers runs them all, top-k in vLLM's fused MoE) or the attention's q, k, v and output."""
    if engine == "hf" and arch.routed_per_token > max(arch.experts_per_token, 1):
        # Llama4TextMoe: the input repeated once an expert and weighted (E·h) beside gate_up (E·2f), act(gate) and
        # its product with up (E·f each), or, later, beside gate_up, the product and the experts' outputs (E·h)
        return max(arch.experts * max(arch.hidden + 4 * arch.ffn, 2 * arch.hidden + 3 * arch.ffn),
                   4 * arch.q_dim + 2 * arch.kv_dim)
    if engine == "hf" and arch.activation == "xielu":
        # XIELUActivation._xielu_python: the up projection's output and four more f-wide temporaries (its x > 0 mask,
        # a byte each, is _hf_pools')
        return max(5 * arch.ffn, 4 * arch.q_dim + 2 * arch.kv_dim)
    if engine == "hf" and arch.experts:
        # transformers 5.24's experts (integrations/moe.py grouped_mm_experts_forward, the default experts
        # implementation): k rows a token, first the gathered inputs beside gate_up and its activation, then the
        # gathered inputs, the down projection's output and its routing-weighted product in the router weights'
        # dtype, reordered: k·h·(2 + 8/e) elements of e bytes with fp32 weights (the live tensors of
        # measure_families.py's glm4_moe prefill), k·h·4 with 16-bit ones (Qwen3-Next's 16,384-token prefill on an
        # H200, validation/measured_cuda_explain.txt); a dense layer's MLP or the shared expert at other moments
        k, f = max(arch.experts_per_token, 1), arch.expert_ffn or arch.ffn
        weighted = 2 if arch.router_weights_16bit else 8 / e
        dense = 3 * arch.ffn if arch.dense_layers or "D" in arch.mlp_pattern else 0
        return max(k * (arch.hidden + 3 * f), k * arch.hidden * (2 + weighted), dense, 3 * arch.shared_width,
                   4 * arch.q_dim + 2 * arch.kv_dim)
    return max(3 * arch.ffn * max(arch.experts_per_token, 1), 4 * arch.q_dim + 2 * arch.kv_dim)


def scan_layers_apart(arch: "Architecture") -> bool:
    """Whether every scan layer is a block of its own, with no MLP, beside MLP-only blocks: Nemotron-H's
    (transformers 5.24 modeling_nemotron_h.py NemotronHBlock holds one mixer, chosen per layer by
    layers_block_type: mamba, attention, mlp or moe). The prefill working set of such a model is then the
    larger of a scan layer's transient and an MLP layer's intermediates (validation/measure_hybrid.py's
    nemotron_h cases, +27% and +10% when both were counted)."""
    mlps = arch.mlp_pattern
    return "-" in mlps and any(m != "-" for m in mlps) and \
        all(m == "-" for kind, m in zip(arch.layer_pattern, mlps) if kind in "MmLP")


def _window_mask(arch: "Architecture", first: int, count: int, batch: int, prompt: int) -> int:
    """Bytes of the bool mask SDPA gets in a prefill past the window of sliding or chunked layers (full-attention
    layers run is_causal, with no mask): prompt² for sliding layers, and a batch's of them for Llama 4's chunked
    layers (read off the live tensors of validation/measure_families.py's olmo3, exaone4 and llama4_text cases)."""
    if not arch.sliding_window or prompt < arch.sliding_window:     # _ignore_causal_mask_sdpa: kv_length >= window
        return 0
    kinds = window_layers(arch, first, count)
    return prompt * prompt * (batch if kinds["chunked"] else 1) if kinds["sliding"] + kinds["chunked"] else 0


def _hf_pools(setup: Setup, stage: parallel.Stage, first_layer: int, stored: Q) -> "list[Pool]":
    """transformers ``generate()``: the prompt's cache and the prefill working set, then the cache at its
    final length and DynamicCache's append copy of one layer."""
    arch, lay, work = setup.arch, setup.layout, setup.workload
    kv_bytes, e = setup.policy.bytes("kv"), setup.policy.bytes("act")
    batch, prompt = work.batch, work.seq
    per_value = kv_values_per_token(arch, work.engine, lay.tp)
    final_tokens = prompt + max(work.new_tokens - 1, 0)
    kv_cache = sym("B", batch) * rnd(per_value * cached_layers(arch, first_layer, stage.layers, final_tokens)
                                     * kv_bytes)
    prompt_cache = sym("B", batch) * rnd(per_value * cached_layers(arch, first_layer, stage.layers, prompt, False)
                                         * kv_bytes)
    tokens = sym("B", batch) * sym("n", prompt)
    # four hidden-wide tensors beside a layer's own: the embedding's output, which the model's forward keeps
    # (inputs_embeds) through every layer, the residual, the block's sum and the norm's output (the live tensors of
    # validation/measure_families.py's glm4_moe prefill; the H200's full-size generate() cases within 0.3%)
    working = (split(sym("wf", _widest(arch, "hf", e)), "t", lay.tp, None) + sym("h", 4 * arch.hidden)) * e * tokens
    if stage.has_head:
        working = working + split(sym("V", arch.output_width), "t", lay.tp) * sym("B", batch) * 8
    if holds_scores(arch, work.attention, prompt):
        # eager's scores beside their fp32 softmax; the math kernel's scores beside its probabilities, in fp32
        working = working + rnd(split(sym("a", eager_working(arch, e) * arch.heads), "t", lay.tp, None) *
                                sym("n", prompt) * tokens)
    mask = _window_mask(arch, first_layer, stage.layers, batch, prompt)
    if mask:
        working = working + sym("M", mask)
    if arch.activation == "xielu":
        working = working + split(sym("f", arch.ffn), "t", lay.tp, None) * tokens      # xIELU's bool mask
    scan = prefill_transient(arch, prompt, e, work.scan_kernels == "fused")
    if scan and (scan_layers_apart(arch) or set(arch.layer_pattern) & set("MPL")):
        # the scan's transient and the MLP's intermediates are in different layers, or (Mamba-2's and DeltaNet's, the
        # whole mixer's moment) freed before the MLP runs: the larger of them, not both
        widest = split(sym("wf", _widest(arch, "hf", e)), "t", lay.tp, None) * e * tokens
        working = working - widest + maximum(widest, split(sym("x", scan), "t", lay.tp, None) * tokens)
    elif scan:
        working = working + split(sym("x", scan), "t", lay.tp, None) * tokens
    kv_source = "keys and values of every cached layer (transformers DynamicCache)"
    state = _state_pools(setup, stage, first_layer, "hf", MOMENTS)
    seeing = vision_activations.inference_pools(setup, stage, MOMENTS)
    everywhere = hf_moments(seeing)
    return [_weights(setup, stored, everywhere), *seeing, *state,
            *blas_workspaces(gpu_catalog()[setup.gpu], 1, everywhere, setup.cublas_workspace),
            make("kv_cache_prompt", "KV cache of the prompt", prompt_cache, ("prefill",), kv_source, KV_SYMBOLS,
                 group="kv_cache"),
            make("prefill_working", "Prefill working set", working, ("prefill",),
                 "one layer's MLP or attention intermediates, four hidden-wide tensors and the last token's logits "
                 "(validation/measured.json, validation/measured_cuda.json)" +
                 (_scan_source(work.scan_kernels) if scan else ""),
                 "wf = widest intermediate per token; h = hidden; e = activation bytes; V = vocabulary" +
                 ("; M = the sliding or chunked layers' bool mask (prompt², a sequence's each when chunked)"
                  if mask else "") +
                 ("; x = a scan layer's transient bytes per token" if scan else "")),
            make("kv_cache", "KV cache", kv_cache, ("decode",), kv_source, KV_SYMBOLS),
            make("cache_append_copy", "Cache append copy (one layer)",
                 ceil(kv_cache / sym("Ls", max(stage.layers, 1))), ("decode",),
                 "DynamicCache appends with torch.cat: one layer's keys and values exist twice", KV_SYMBOLS,
                 group="decode_working")]


def _cache_source(pages: "Mapping[str, int] | None") -> str:
    """Where vLLM's pre-allocated cache comes from: blocks of 16 tokens, a hybrid's pages, or an attention-free
    model's state pages."""
    if not pages:
        return "vllm/v1/core/kv_cache_utils.py: whole blocks of 16 tokens"
    if not pages["block_tokens"]:
        return ("vllm/v1/core/kv_cache_utils.py and vllm/v1/kv_cache_interface.py MambaSpec (v0.11): an attention-free "
                "model's cache is whole pages, one state-space layer's state of one sequence each")
    return (f"vllm/v1/core/kv_cache_utils.py: a hybrid's blocks are pages of {pages['block_tokens']} tokens of one "
            "attention layer, each padded state-space layer's state taking one page (vllm/model_executor/models/"
            "config.py HybridAttentionMambaModelConfig, v0.11)")


def _scan_source(kernels: str) -> str:
    """Where a prefill's scan-layer transient comes from, for the kernels it runs."""
    if kernels == "fused":
        return ("; a scan layer's buffers with the fused kernels (fla's chunk_gated_delta_rule measured, "
                "validation/measured_cuda_families.json; mamba_ssm's mamba_chunk_scan_combined from its source)")
    return ("; a scan layer's chunk matrices with the reference kernels (Mamba-2's and DeltaNet's read off "
            "transformers' mamba2_chunk_scan and torch_chunk_gated_delta_rule, validation/measured_cuda_explain.txt; "
            "Mamba-1's a loose fit of validation/measure_hybrid.py)")


def hf_moments(pools: "list[Pool]") -> "tuple[str, ...]":
    """generate()'s moments: the vision tower's forward before the prefill when its pools have it."""
    encoder = any(vision_activations.ENCODER in p.moments for p in pools)
    return (vision_activations.ENCODER, *MOMENTS) if encoder else MOMENTS


def _state_pools(setup: Setup, stage: parallel.Stage, first_layer: int, engine: str,
                 moments: "tuple[str, ...]") -> "list[Pool]":
    """The recurrent and convolution state of the batch's sequences in this stage's hybrid layers (none for a
    model whose every layer is attention)."""
    arch = setup.arch
    if not has_state(arch):
        return []
    per_sequence = state_per_sequence(arch, first_layer, stage.layers, engine, setup.layout.tp,
                                      setup.policy.bytes("act"))
    if engine == "vllm":
        source = ("vllm/model_executor/layers/mamba/mamba_utils.py MambaStateShapeCalculator: K − 1 columns, "
                  "model dtype (v0.11); one state slot per request")
    else:
        source = ("transformers 5.24 cache_utils.py LinearAttentionLayer: the whole kernel K in the model dtype, "
                  "the recurrent state in fp32")
    return [make("recurrent_state", "Recurrent and convolution state", sym("B", setup.workload.batch) * per_sequence,
                 moments, source, STATE_SYMBOLS)]


def max_num_seqs(work: Workload, gpu: "Mapping[str, Any]") -> int:
    """vLLM's max_num_seqs: the user's, else 1024 on GPUs of 70 GiB or more other than the A100, else 256, and no more
    than max_num_batched_tokens (vllm/engine/arg_utils.py _set_default_args_v1, v0.10-v0.11, L1676-1682)."""
    default = 1024 if gpu["usable_bytes"] >= 70 * GIB and "a100" not in gpu["id"] else 256
    return work.max_num_seqs or min(default, work.max_batched_tokens)


def _vllm_pools(setup: Setup, stage: parallel.Stage, gpu: "Mapping[str, Any]", stored: Q, per_token: Q,
                pages: "Mapping[str, int] | None") -> "tuple[list[Pool], int]":
    """(the pools, the bytes left for the KV cache, negative where nothing is) — vLLM's start-up arithmetic: requested
    memory minus weights, non-torch memory and the profiling run's activation peak is the KV cache, in whole blocks
    (a hybrid's state slots come out of the same pool: vllm/v1/core/kv_cache_utils.py gives attention and Mamba layers
    pages of one size)."""
    arch, lay, work = setup.arch, setup.layout, setup.workload
    e = setup.policy.bytes("act")
    unbuilt = vllm_multimodal.unbuilt_weights(setup, stage)      # LLaVA's tower past its feature layer
    stored = stored - unbuilt if unbuilt else stored
    requested = floor(sym("M", gpu["usable_bytes"]) * sym("u", work.gpu_util))
    non_torch = sym("N", VLLM_NON_TORCH)
    tokens = sym("Tb", work.max_batched_tokens)
    activation = rnd((split(sym("wf", _widest(arch, "vllm")), "t", lay.tp, None) + sym("h", 3 * arch.hidden)) * e *
                     tokens)
    seqs = max_num_seqs(work, gpu)
    if stage.has_head:
        # The sampler's warm-up (_dummy_sampler_run): fp32 logits of max_num_seqs requests over the
        # gathered vocabulary, sorted for top-k/top-p: about three fp32 copies (approximate, not measured).
        activation = activation + sym("V", arch.output_width) * sym("seqs", seqs) * 12
    # every pipeline rank builds and loads the vision tower and runs profile_run's encoder pass, which has no rank
    # guard (vLLM 0.11.0 qwen2_5_vl.py L1011-1021, L1464-1469; gpu_model_runner.py L3325)
    encoder = vllm_multimodal.profile_activation(setup, activation, seqs)
    if encoder:
        activation = rnd(encoder[0])
    tower = vllm_multimodal.tower_weights(setup, stage)
    buffers = vllm_multimodal.deepstack_buffers(setup, stage)
    drafter = _mtp_weights(setup, stage) or _draft_weights(setup)
    left = requested - stored - non_torch - activation - (sym("Wd", drafter.bytes) if drafter else num(0)) - \
        (sym("Wv", tower.bytes) if tower else num(0)) - (sym("Wb", buffers.bytes) if buffers else num(0))
    block = per_token * BLOCK_TOKENS
    if pages:           # a hybrid: blocks of one page per layer of a group (pycore.memory.recurrent.vllm_pages)
        block = sym("page", pages["page_bytes"]) * sym("g", pages["group_size"])
    if left.value > 0 and block.value > 0:
        kv = floor(left / block) * block
    else:
        kv = num(0)
    source = "vllm/v1/worker/gpu_worker.py determine_available_memory (vLLM 0.11)"
    return ([
        _weights(setup, stored, VLLM_MOMENTS, unbuilt is not None), *([drafter] if drafter else []), *([tower] if tower else []),
        *([buffers] if buffers else []),
        make("non_torch", "Memory outside PyTorch (cuBLAS, NCCL)", non_torch, VLLM_MOMENTS, source,
             "N = non-torch memory vLLM's profiler charges (cuBLAS workspaces, kernels; not the CUDA context)"),
        make("profile_activations", "Activation peak of the profiling run" + (", vision encoder included" if encoder
                                                                               else ""),
             activation, VLLM_MOMENTS, source + ("; " + vllm_multimodal.SOURCE if encoder else ""),
             "Tb = max_batched_tokens; wf = widest intermediate per token; h = hidden; V = vocabulary; "
             "seqs = sequences sampled (max_num_seqs); 12 = three fp32 copies of the logits" +
             ("; " + encoder[1] if encoder else "")),
        make("kv_cache", "KV cache and state slots (pre-allocated)" if pages else "KV cache (pre-allocated blocks)",
             kv, VLLM_MOMENTS, _cache_source(pages), "M = GPU memory; u = gpu_util" +
             ("; page = one layer's page; g = layers per group" if pages else "; per-token bytes × 16 per block")),
    ], int(left.value))


def vllm_capacity(result: "Mapping[str, Any]", work: Workload) -> "dict[str, Any]":
    """vLLM's start-up log figures: "GPU KV cache size: N tokens" and "Maximum concurrency"."""
    kv = result["components"].get("kv_cache", 0)
    context = work.max_model_len or work.seq + work.new_tokens
    capacity = _capacity(result, kv, context)
    if result.get("available") is not None:     # what gpu_worker.py logs as "Available KV cache memory"; < 0 refuses
        capacity["kv_bytes_left"] = result["available"]
    if work.max_num_seqs > work.max_batched_tokens:
        # vllm/config/scheduler.py SchedulerConfig._verify_args refuses a step of more sequences than tokens
        capacity = {**capacity, "starts": False, "seqs_over_tokens": (work.max_num_seqs, work.max_batched_tokens)}
    positions = int(result.get("max_positions") or 0)
    if positions and context > positions:
        # vllm/config/model.py _get_and_verify_max_len (v0.11) refuses a max_model_len over the config's
        # max_position_embeddings (as a linear or yarn rope_scaling raises it: pycore.model.hf_config
        # _scaled_positions) unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
        longest = capacity.get("longest_max_model_len")
        capacity = {**capacity, "starts": False, "over_positions": (context, positions),
                    "longest_max_model_len": positions if longest is None else min(int(longest), positions)}
    return capacity


def _capacity(result: "Mapping[str, Any]", kv: int, context: int) -> "dict[str, Any]":
    """vllm_capacity's figures from the KV cache's bytes, for the cache's page layout."""
    per_token = result["kv_bytes_per_token"]
    if result.get("vllm_pages"):        # every model with state-space, sliding or chunked layers
        return _hybrid_capacity(result["vllm_pages"], kv, context, result.get("state_bytes_per_sequence", 0))
    blocks = kv // (per_token * BLOCK_TOKENS) if per_token else 0
    needed = -(-context // BLOCK_TOKENS)
    # vllm/v1/core/kv_cache_utils.py: tokens = blocks × block size; concurrency = blocks / cdiv(L, 16).
    # check_enough_kv_cache_memory (v0.11) refuses to start when one request of max_model_len needs more
    # blocks than the cache holds, and its estimate_max_model_len names the longest that would fit.
    return {"kv_cache_tokens": blocks * BLOCK_TOKENS, "kv_cache_blocks": blocks, "context": context,
            "max_concurrency": blocks / needed if context else 0.0,
            "starts": blocks >= needed and blocks > 0, "blocks_needed": needed, "state_bytes_per_request": 0,
            "kv_bytes_needed": needed * BLOCK_TOKENS * per_token, "kv_bytes_available": kv,
            "longest_max_model_len": blocks * BLOCK_TOKENS}


def _hybrid_capacity(pages: "Mapping[str, int]", kv: int, context: int, state: int) -> "dict[str, Any]":
    """vLLM 0.11's figures for layers not all alike (kv_cache_utils.py): blocks = available // page // group_size;
    "GPU KV cache size" = blocks // groups × block tokens; concurrency = blocks / the blocks one request takes
    (cdiv(max_model_len, block) in each full-attention group, its window's in each sliding or chunked group, one
    in each state group; the windows' and states' blocks are "state_groups" below, what every request keeps)."""
    page, group, block = pages["page_bytes"], pages["group_size"], pages["block_tokens"]
    blocks = kv // (page * group)
    sliding = pages.get("sliding_groups", 0)
    groups = pages["attention_groups"] + pages["state_groups"] + sliding
    # a sliding or chunked group's request holds at most its window (+ the batch being prefilled) in blocks
    windowed = _window_blocks(pages, context) if sliding else 0
    fixed = pages["state_groups"] + sliding * windowed
    per_request = pages["attention_groups"] * (-(-context // block) if block else 0) + fixed
    needed, starts = per_request * page * group, blocks >= per_request > 0
    longest = None
    if block:           # the start-up check counts layer by layer, not the padded groups the blocks are shared in
        needed = _start_bytes(pages, context)
        starts = blocks > 0 and needed <= kv
    if block and pages["attention_groups"]:        # estimate_max_model_len's bisection, on the same sum
        longest = _largest(kv // page * block, lambda length: _start_bytes(pages, length) <= kv)
    return {"kv_cache_tokens": blocks // groups * block, "kv_cache_blocks": blocks, "context": context,
            "max_concurrency": blocks / per_request if per_request else 0.0, "starts": starts,
            "blocks_needed": per_request, "state_bytes_per_request": state, "block_tokens": block,
            "attention_groups": pages["attention_groups"], "state_groups": fixed,
            "kv_bytes_needed": needed, "kv_bytes_available": kv,
            "longest_max_model_len": longest,
            **({"sliding_groups": sliding, "sliding_tokens": pages.get("sliding_tokens", 0),
                "sliding_extra_block": pages.get("sliding_extra_block", 0),
                "state_only_groups": pages["state_groups"]} if sliding else {}),
            **(_per_kind(pages, context) if pages.get("state_layers") and not sliding else {})}


def _start_bytes(pages: "Mapping[str, int]", length: int) -> int:
    """What vLLM 0.11's start-up check asks of the cache for one request of ``length`` tokens: the sum over the layers
    of each one's max_memory_usage_bytes (v1/core/kv_cache_utils.py check_enough_kv_cache_memory; v1/kv_cache_interface
    .py): cdiv(length, block) pages a full-attention layer, a windowed layer's window and the batch being prefilled (one
    page more when sliding), one page a state layer. Layer by layer: a group padded with missing layers asks nothing
    for them (Gemma 3 27B's 52 sliding layers take 6 groups of 10)."""
    return (pages["full_layers"] * -(-length // pages["block_tokens"]) +
            pages["windowed_layers"] * _window_blocks(pages, length) + pages["state_layers"]) * pages["page_bytes"]


def _window_blocks(pages: "Mapping[str, Any]", length: int) -> int:
    """Blocks a sliding or chunked layer (or group) holds for one request of ``length`` tokens: its window and the
    batch being prefilled at most, one more when sliding (the window may not start at a block's start)."""
    block = int(pages["block_tokens"])
    return -(-min(int(pages.get("sliding_tokens", 0)), length) // block) + int(pages.get("sliding_extra_block", 0))


def _largest(high: int, fits: "Callable[[int], bool]") -> int:
    """The largest length from 0 to ``high`` that ``fits`` (which holds up to some length and not beyond), by bisection."""
    low = 0
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low


def _per_kind(pages: "Mapping[str, int]", context: int) -> "dict[str, int]":
    """What one request takes of a hybrid's cache by layer kind: its full-attention groups' blocks (cdiv(max_model_len,
    block) each) and one block in each state group, every block page × group_size bytes (kv_cache_utils.py, v0.11)."""
    block = pages["block_tokens"]
    return {"block_bytes": pages["page_bytes"] * pages["group_size"], "page_bytes": pages["page_bytes"],
            "group_size": pages["group_size"], "groups": pages["attention_groups"] + pages["state_groups"],
            "attention_blocks": pages["attention_groups"] * (-(-context // block) if block else 0),
            "state_blocks": pages["state_groups"], "attention_layers": pages.get("attention_layers", 0),
            "state_layers": pages["state_layers"]}


def longest_context(capacity: "Mapping[str, Any]", batch: int) -> "int | None":
    """The longest context each of ``batch`` requests could have in vLLM's cache: its share of the blocks, less
    a hybrid's state slots, in tokens; None for a model without attention layers (no limit from memory)."""
    batch = max(batch, 1)
    if "attention_groups" not in capacity:
        return capacity["kv_cache_tokens"] // batch if capacity.get("kv_cache_tokens") is not None else None
    if not capacity["attention_groups"]:
        return None
    if capacity.get("sliding_groups"):
        return _longest_with_windows(capacity, batch)
    spare: int = capacity["kv_cache_blocks"] // batch - capacity["state_groups"]
    return max(spare, 0) // int(capacity["attention_groups"]) * int(capacity["block_tokens"])


def _longest_with_windows(capacity: "Mapping[str, Any]", batch: int) -> int:
    """The longest context ``batch`` requests could each have when sliding or chunked groups hold a request's window
    (shorter for a shorter context): the largest L with batch × blocks(L) within the cache, by bisection."""
    block, blocks = int(capacity["block_tokens"]), int(capacity["kv_cache_blocks"])

    def per_request(length: int) -> int:
        return int(capacity["attention_groups"]) * -(-length // block) + \
            int(capacity["sliding_groups"]) * _window_blocks(capacity, length) + int(capacity["state_only_groups"])
    return _largest(blocks * block, lambda length: batch * per_request(length) <= blocks)


def refusal(capacity: "Mapping[str, Any] | None") -> str:
    """vLLM's start-up refusal in words when its KV cache cannot hold one request of max_model_len, else ""
    (vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory raises ValueError with these figures)."""
    if not capacity or capacity["starts"]:
        return ""
    gib = 2**30
    who, names = capacity.get("engine", "vLLM"), capacity.get("inputs", {})      # a colocated rollout's own words
    if "over_positions" in capacity:
        length, positions = capacity["over_positions"]
        return (f"{who} would refuse to start: {names.get('max_model_len', 'max_model_len')} {length:,} is greater "
                f"than the model's {positions:,} "
                "positions (max_position_embeddings; vllm/config/model.py _get_and_verify_max_len; "
                f"VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 overrides it); the longest it would accept is "
                f"{capacity['longest_max_model_len']:,}")
    if "seqs_over_tokens" in capacity:
        seqs, tokens = capacity["seqs_over_tokens"]
        return (f"{who} would refuse to start: max_num_batched_tokens ({tokens:,}) must be "
                f"greater than or equal to max_num_seqs ({seqs:,}) (vllm/config/scheduler.py)")
    if "no_bf16" in capacity:
        name, sm = capacity["no_bf16"]
        return (f"{who} would refuse to start: bf16 needs compute capability 8.0 or more and the {name} has "
                f"{sm // 10}.{sm % 10} (vllm/platforms/cuda.py check_if_supports_dtype); precision=fp16 (--dtype half) "
                "or auto serves it in float16")
    util, length = names.get("gpu_util", "gpu_util"), names.get("max_model_len", "max_model_len")
    if not capacity["kv_cache_blocks"]:
        shorter = capacity.get("longest_max_model_len")         # a shorter one profiles less (a VL model's video)
        return (f"{who} would refuse to start: no memory is left for the KV cache (weights, non-torch memory and "
                f"the profiling run's activations fill {util} of the GPU); raise {util} or split the model" +
                (f" ({names['split']})" if "split" in names else "") +
                (f"; the longest {length} it would accept is {shorter:,}" if shorter else ""))
    longest = capacity["longest_max_model_len"]
    what = "KV cache and state" if capacity.get("state_bytes_per_request") else "KV cache"
    return (f"{who} would refuse to start: one request of max_model_len {capacity['context']:,} tokens needs "
            f"{capacity['kv_bytes_needed'] / gib:.2f} GiB of {what}, more than the "
            f"{capacity['kv_bytes_available'] / gib:.2f} GiB available" +
            (f"; the longest {length} it would accept is {longest:,}" if longest else ""))
