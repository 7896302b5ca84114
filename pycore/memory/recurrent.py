"""The fixed-size state per sequence that state-space, linear-attention and convolution layers keep instead
of a KV cache (pycore/model/mixers.py says which layer is which).

Per layer and sequence, on one tensor-parallel rank:

========================  ======================================  =========================================
mixer                     convolution state                       recurrent (SSM) state
========================  ======================================  =========================================
Mamba-2 (M, and P's)      (inner + 2·groups·state) × K'           heads × head_dim × state
Mamba (m)                 inner × K'                              inner × state
gated DeltaNet (L)        (2·key heads·key dim + value width)·K'  value heads × key dim × value dim
short convolution (V)     hidden × K'                             none
========================  ======================================  =========================================

K' is the convolution width the engine keeps: transformers 5.24's ``LinearAttentionLayer`` keeps the whole
kernel K (``cache_utils.py``, ``lazy_initialization``: ``conv_kernel_size``) with the recurrent state in fp32
(its torch scans return ``float()`` states); vLLM keeps K − 1 columns (``MambaStateShapeCalculator``,
vllm/model_executor/layers/mamba/mamba_utils.py, v0.11) in the model dtype for both
(``MambaStateDtypeCalculator``: ``mamba_cache_dtype`` and ``mamba_ssm_cache_dtype`` default to "auto") and
splits heads and channels t ways.
"""

from typing import TYPE_CHECKING

from pycore.base.expr import Q, num, sym
from pycore.model.mixers import STATEFUL, deltanet_widths, layer_counts, mamba2_widths, window_layers

if TYPE_CHECKING:
    from pycore.model.architecture import Architecture

SYMBOLS = ("Lm = Mamba-2 layers; Lssm = Mamba layers; Ldn = gated DeltaNet layers; Lc = short-convolution layers; "
           "K = convolution width kept; c = convolution channels; s = recurrent state elements; t = tensor-parallel "
           "degree; B = sequences")


def _per_layer(arch: "Architecture", mixer: str, engine: str, tp: int) -> "tuple[int, int]":
    """(convolution state elements, recurrent state elements) of one layer of ``mixer`` per sequence."""
    kernel = arch.conv_kernel - 1 if engine == "vllm" else arch.conv_kernel
    if mixer in "MP":
        _, channels = mamba2_widths(arch)
        state = arch.ssm_heads * arch.ssm_head_dim * arch.ssm_state
    elif mixer == "m":
        channels, state = arch.ssm_inner, arch.ssm_inner * arch.ssm_state
    elif mixer == "L":
        key, value = deltanet_widths(arch)
        channels, state = 2 * key + value, arch.linear_value_heads * arch.linear_key_dim * arch.linear_value_dim
    else:
        channels, state = arch.hidden, 0
    return -(-channels // tp) * kernel, -(-state // tp)


def state_per_sequence(arch: "Architecture", first: int, count: int, engine: str, tp: int,
                       model_bytes: float) -> Q:
    """Bytes of state one sequence keeps in layers ``first`` .. ``first + count - 1`` on one GPU."""
    total: "Q | None" = None
    letters = {"M": "Lm", "P": "Lm", "m": "Lssm", "L": "Ldn", "V": "Lc"}
    # vLLM keeps the state in the model's dtype unless the config asks for fp32 (Qwen3.5's mamba_ssm_dtype, read by
    # vLLM's MambaStateDtypeCalculator since it supports the family); transformers' torch scans return fp32 states
    state_bytes = model_bytes if engine == "vllm" and not arch.ssm_state_fp32 else 4
    for mixer, layers in sorted(layer_counts(arch, first, count).items()):
        if mixer not in STATEFUL:
            continue
        conv, state = _per_layer(arch, mixer, engine, tp)
        part = sym("c·K", conv) * model_bytes
        if state:
            part = part + sym("s", state) * state_bytes
        term = sym(letters[mixer], layers) * part
        total = term if total is None else total + term
    return total if total is not None else num(0)


def has_state(arch: "Architecture") -> bool:
    return any(letter in STATEFUL for letter in arch.layer_pattern)


def vllm_pages(arch: "Architecture", first: int, count: int, tp: int, element_bytes: "tuple[float, float]",
               batched: int = 8192, drafter_layers: int = 0) -> "dict[str, int] | None":
    """How vLLM 0.11 lays out a cache whose layers are not all alike: None when every layer is full attention.

    Sliding-window and chunked-attention layers (v1/kv_cache_interface.py SlidingWindowSpec,
    ChunkedLocalAttentionSpec) take at most cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), 16) + 1
    and cdiv(min(chunk + max_num_batched_tokens, max_model_len), 16) blocks a request, in groups of their own
    beside the full-attention layers', as below.

    vllm/model_executor/models/config.py ``HybridAttentionMambaModelConfig.verify_and_update_config`` raises
    the attention block size to the smallest multiple of 16 tokens whose page (one layer's keys and values)
    holds one layer's state, and pads the state page to it; vllm/v1/core/kv_cache_utils.py
    ``_get_kv_cache_groups_uniform_page_size`` groups the layers of each kind in groups of the fewest kind's
    count (group_size), and ``get_num_blocks`` gives available // page // group_size blocks, which every
    group shares. A request takes cdiv(max_model_len, block) blocks in each attention group and one in each
    state group (MambaSpec: one state per request). ``drafter_layers``: full-attention layers an MTP drafter adds
    to the same cache (Qwen3-Next's, v1/spec_decode/eagle.py), counted with the model's own.
    ``element_bytes``: the KV cache's and the model dtype's bytes per value.
    """
    kv_bytes, model_bytes = element_bytes           # the KV cache's element size, the model dtype's (the state's)
    counts = layer_counts(arch, first, count)
    stateful = sum(n for mixer, n in counts.items() if mixer in STATEFUL)
    kinds = dict(window_layers(arch, first, count))
    kinds["full"] += drafter_layers
    if kinds["chunked"]:
        # vLLM 0.11 turns its hybrid KV cache manager off for chunked local attention unless
        # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 (config/__init__.py VllmConfig.__post_init__), and
        # unify_hybrid_kv_cache_specs then keeps every attention layer's cache whole (Llama 4)
        kinds = {"full": kinds["full"] + kinds["sliding"] + kinds["chunked"], "sliding": 0, "chunked": 0}
    if not stateful and not kinds["sliding"] and not kinds["chunked"]:
        return None
    if arch.attention == "mla":
        return None                                 # MLA's own spec: the uniform path in pycore.memory.serving
    state_page = 0
    if stateful:
        conv, state = _per_layer(arch, next(m for m in counts if m in STATEFUL), "vllm", tp)
        state_page = int(conv * model_bytes + state * (4 if arch.ssm_state_fp32 else model_bytes))
    kv_heads = -(-arch.kv_heads // tp) if arch.kv_heads >= tp else 1
    token_page = int(2 * kv_heads * arch.dim_head * kv_bytes)       # FullAttentionSpec, one layer, one token
    attention = kinds["full"] + kinds["sliding"] + kinds["chunked"]
    if not attention:
        return {"block_tokens": 0, "page_bytes": state_page, "group_size": stateful, "attention_groups": 0,
                "state_groups": 1, "sliding_groups": 0, "sliding_tokens": 0, "attention_layers": 0,
                "state_layers": stateful, "full_layers": 0, "windowed_layers": 0}
    block = max(16 * -(-state_page // (16 * token_page)), 16)
    present = [n for n in (kinds["full"], kinds["sliding"] + kinds["chunked"], stateful) if n]
    group = min(present)
    window = (arch.sliding_window - 1 + batched) if kinds["sliding"] else (arch.sliding_window + batched)
    return {"block_tokens": block, "page_bytes": block * token_page, "group_size": group,
            "attention_groups": -(-kinds["full"] // group), "state_groups": -(-stateful // group),
            "sliding_groups": -(-(kinds["sliding"] + kinds["chunked"]) // group), "sliding_tokens": window,
            "sliding_extra_block": 1 if kinds["sliding"] else 0, "attention_layers": attention, "state_layers": stateful,
            "full_layers": kinds["full"], "windowed_layers": kinds["sliding"] + kinds["chunked"]}
