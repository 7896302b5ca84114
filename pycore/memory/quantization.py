"""Quantized weights: what each storage format really costs, scales and zero points included.

Bits per weight, by format:
- int8: bitsandbytes LLM.int8 (Dettmers et al. 2022) keeps one fp32 scale per output row: 8 + 32/in bits.
- fp8: one fp32 scale per tensor (fp8) or per output channel (fp8-channel).
- gptq-int4 / awq-int4: 4-bit weights in groups of group_size (default 128) with an fp16 scale and a
  packed 4-bit zero point per group (Frantar et al. 2022; Lin et al. 2023): 4 + 20/group bits.
- nf4: bitsandbytes 4-bit NormalFloat with one fp32 absmax per 64 weights: 4 + 32/64 = 4.5 bits;
  nf4-dq double-quantizes the absmax to 8 bits with an fp32 constant per 256 of them (Dettmers et al.
  2023, QLoRA section 3): 4 + 8/64 + 32/(64·256) = 4.127 bits.
- GGUF (llama.cpp ggml-common.h block structs): Q8_0 34 bytes per 32 weights = 8.5 bits, Q6_K 210/256 =
  6.5625, Q5_K 176/256 = 5.5, Q4_K 144/256 = 4.5, Q4_0 18/32 = 4.5, Q3_K 110/256 = 3.4375, Q2_K 84/256 =
  2.625. The _M mixtures keep some tensors at a higher type; their bits per weight here are the file
  sizes llama.cpp reports for Llama-class models (Q5_K_M 5.69, Q4_K_M 4.89, Q3_K_M 3.91): approximate.

int8, fp8, GPTQ, AWQ and NF4 quantize the linear layers of the blocks; embeddings, the output head and
norms stay in the weight dtype. GGUF files quantize every tensor, at the bits per weight above.
"""

from typing import TYPE_CHECKING

from pycore.base.expr import Q, rnd, sym

if TYPE_CHECKING:
    from pycore.model.architecture import Architecture, ParameterCount

# (bits per weight, bits of scale/zero per group, group size or "group"/"row"/"tensor", whether GGUF)
Format = tuple[float, float, "int | str", bool]

FORMATS: "dict[str, Format | None]" = {
    # name: (bits per weight, bits of scale/zero per group, group size or "row"/"tensor", GGUF)
    "none": None,
    "int8": (8, 32, "row", False),
    "fp8": (8, 32, "tensor", False),
    "fp8-channel": (8, 32, "row", False),
    "gptq-int4": (4, 20, "group", False),
    "awq-int4": (4, 20, "group", False),
    "nf4": (4, 32, 64, False),
    "nf4-dq": (4, 8 + 32 / 256, 64, False),
    "q8_0": (8.5, 0, 1, True),
    "q6_k": (6.5625, 0, 1, True),
    "q5_k_m": (5.69, 0, 1, True),
    "q4_k_m": (4.89, 0, 1, True),
    "q4_0": (4.5, 0, 1, True),
    "q3_k_m": (3.91, 0, 1, True),
    "q2_k": (2.625, 0, 1, True),
}


def bits_per_weight(name: str, group_size: int, row_length: int) -> float:
    """Storage bits per quantized weight, scales and zero points included."""
    spec = FORMATS[name]
    if spec is None:
        raise ValueError(f"{name!r} is no quantized format: its weights keep the policy's dtype")
    bits, extra, group, _ = spec
    if group == "tensor":
        return bits
    size = group_size if group == "group" else row_length if group == "row" else int(group)
    return bits + extra / size


def weight_bytes_q(name: str, group_size: int, arch: "Architecture", counts: "ParameterCount", weight_bytes_per_param: float) -> Q:
    """Bytes of all weights stored in format ``name``, as a quantity with its formula (pycore.base.expr).

    Per-row scales are counted for a row of ``hidden`` inputs, the width of most of the model's matrices.
    """
    total = sym("P", counts.total)
    spec = FORMATS.get(name)
    if spec is None or arch.kind == "generic":
        return rnd(total * weight_bytes_per_param)
    bits = bits_per_weight(name, group_size, arch.hidden)
    if spec[3]:                 # GGUF: every tensor at the file's bits per weight
        return rnd(total * sym("bits", bits) / 8)
    quantized = sym("Pq", matrix_params(arch, counts))
    return rnd(quantized * sym("bits", bits) / 8 + (total - quantized) * weight_bytes_per_param)


def weight_bytes(name: str, group_size: int, arch: "Architecture", counts: "ParameterCount", weight_bytes_per_param: float) -> float:
    """Bytes of all weights when the model is stored in format ``name``."""
    return weight_bytes_q(name, group_size, arch, counts, weight_bytes_per_param).value


def matrix_params(arch: "Architecture", counts: "ParameterCount") -> int:
    """Parameters in the blocks' linear layers: all but embeddings, the output head, norms and routers."""
    norms = arch.layers * arch.norms_per_layer * arch.norm_params
    routers = arch.layers * arch.hidden * arch.experts
    return counts.layers_total - norms - routers
