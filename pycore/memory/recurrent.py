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
from pycore.model.mixers import STATEFUL, deltanet_widths, layer_counts, mamba2_widths

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
    total = num(0)
    letters = {"M": "Lm", "P": "Lm", "m": "Lssm", "L": "Ldn", "V": "Lc"}
    state_bytes = model_bytes if engine == "vllm" else 4
    for mixer, layers in sorted(layer_counts(arch, first, count).items()):
        if mixer not in STATEFUL:
            continue
        conv, state = _per_layer(arch, mixer, engine, tp)
        part = sym("c·K", conv) * model_bytes
        if state:
            part = part + sym("s", state) * state_bytes
        total = total + sym(letters[mixer], layers) * part
    return total


def has_state(arch: "Architecture") -> bool:
    return any(letter in STATEFUL for letter in arch.layer_pattern)
