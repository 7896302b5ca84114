"""Exact weight bytes from a checkpoint's headers: safetensors (one file, or shards with their index) and GGUF.

Only the header bytes are read, never the tensors: a safetensors file's first 8 bytes and the JSON after them,
a GGUF file's header up to its data section. Every read is bounded and malformed input is refused with a
``FieldError("header", ...)`` naming what is wrong.

Sources:

- safetensors: the format's own reader, huggingface/safetensors ``safetensors/src/tensor.rs`` (v0.8.0):
  a little-endian u64 N (at most ``MAX_HEADER_SIZE`` = 100,000,000), then N bytes of JSON starting with
  ``{``: each tensor ``{"dtype", "shape", "data_offsets": [begin, end]}`` relative to the first byte after
  the header, the tensors contiguous from 0 in offset order and ``end - begin`` = elements x bit size / 8
  in whole bytes (``Metadata::validate``), ``"__metadata__"`` a map of strings; the file ends where the
  last tensor does. The dtypes and their bit sizes are ``Dtype::bitsize`` (BOOL, F4, F6_E2M3, F6_E3M2, U8,
  I8, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ, I16, U16, F16, BF16, I32, U32, F32, C64, F64,
  I64, U64).
- A sharded checkpoint: transformers' ``model.safetensors.index.json``,
  ``{"metadata": {"total_size": ...}, "weight_map": {tensor: shard file}}``.
- GGUF: ggml's ``docs/gguf.md`` and its reader ``ggml/src/gguf.cpp`` (``gguf_init_from_reader``,
  llama.cpp at 067d44f): magic ``GGUF``, u32 version (2 or 3; 1 is refused there too), u64 tensor
  count, u64 key/value count, the key/values (a string key, a u32 value type, the value; 13 value types),
  then per tensor a string name, u32 dimension count (at most GGML_MAX_DIMS = 4), u64 dimensions, the ggml
  type and a u64 offset into the data section, which starts at the header's end rounded up to
  ``general.alignment`` (default 32); each tensor starts where the one before it ends, rounded up.
  Strings are a u64 length and UTF-8 bytes; the first dimension must be a whole number of blocks.
- ggml types' block sizes and bytes per block: gguf-py ``gguf/constants.py`` ``GGML_QUANT_SIZES`` (gguf
  0.19.0 on PyPI, QK_K = 256), the same numbers as ``type_traits`` (``blck_size``, ``type_size``) in
  ``ggml/src/ggml.c``; tests/test_checkpoint.py holds the table to the installed package's.
"""

import json
import os
import re
import struct
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

from pycore.base.errors import FieldError

MAX_HEADER = 100_000_000            # safetensors' MAX_HEADER_SIZE; the GGUF header is held to the same
MAX_TENSORS = 1_000_000
MAX_JSON_DEPTH = 16                 # a safetensors header needs 3, an index 2
MAX_JSON_VALUES = 8_000_000         # commas, strings, arrays and objects in the JSON, bounded before parsing
MAX_NAME = 4096                     # characters in a tensor's, a key's or a shard's name
MAX_DIMS = 64                       # safetensors sets none; GGUF allows 4 (GGML_MAX_DIMS)
MAX_ARRAY = 1 << 24                 # elements of one GGUF array (vocabularies are up to ~10^6)
MAX_NESTED = 4096                   # arrays in one GGUF array of arrays
MAX_ARRAY_DEPTH = 2                 # GGUF arrays of arrays, no deeper (llama.cpp refuses any; the spec allows them)
KEEP_STRING = 1024                  # GGUF metadata strings longer than this are kept as their length
KEEP_ARRAY = 64                     # GGUF arrays longer than this are kept as their type and length
GGUF_FIRST_READ = 1 << 20           # bytes read first from a GGUF file; doubled while the header goes on

# safetensors Dtype::bitsize (safetensors/src/tensor.rs, v0.8.0)
SAFETENSORS_BITS = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8,
    "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}

# ggml type id -> (name, elements per block, bytes per block): gguf 0.19.0 gguf/constants.py GGML_QUANT_SIZES
# and GGMLQuantizationType. Ids 4, 5 (Q4_2, Q4_3) and 31-33, 36-38 (repacked Q4_0/IQ4_NL) were removed.
GGML_TYPES: "dict[int, tuple[str, int, int]]" = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 40), 10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292), 16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50), 20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110), 22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136), 24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4), 27: ("I64", 1, 8),
    28: ("F64", 1, 8), 29: ("IQ1_M", 256, 56), 30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66), 39: ("MXFP4", 32, 17), 40: ("NVFP4", 64, 36), 41: ("Q1_0", 128, 18),
}

# GGUF value types (gguf.cpp GGUF_TYPE_*): id -> (name, struct format); 8 is a string, 9 an array
GGUF_VALUE_TYPES: "dict[int, tuple[str, str]]" = {
    0: ("u8", "B"), 1: ("i8", "b"), 2: ("u16", "H"), 3: ("i16", "h"), 4: ("u32", "I"), 5: ("i32", "i"),
    6: ("f32", "f"), 7: ("bool", "B"), 8: ("str", ""), 9: ("arr", ""), 10: ("u64", "Q"), 11: ("i64", "q"),
    12: ("f64", "d"),
}

POOLS = ("embedding", "attention", "mlp", "norms", "experts", "head", "vision", "other")
LAYER_POOLS = ("attention", "mlp", "norms")

# the GGUF metadata the estimate's architecture reads, under "<general.architecture>."
ARCHITECTURE_KEYS = ("block_count", "embedding_length", "feed_forward_length", "attention.head_count",
                     "attention.head_count_kv", "attention.key_length", "attention.value_length",
                     "context_length", "vocab_size", "expert_count", "expert_used_count",
                     "expert_feed_forward_length", "expert_shared_count")


def _error(message: str) -> FieldError:
    return FieldError("header", message)


class Truncated(FieldError):
    """The bytes end inside the header: ``needed`` bytes would hold what was being read."""

    def __init__(self, needed: int, what: str, have: int) -> None:
        super().__init__("header", f"the bytes end at {have:,} inside {what} (it needs {needed:,})")
        self.needed = needed


@dataclass(frozen=True)
class Tensor:
    """One tensor as its header describes it: stored dtype, shape and exact bytes, and the file it is in."""

    name: str
    dtype: str
    shape: "tuple[int, ...]"
    nbytes: int
    file: str = ""


@dataclass(frozen=True)
class Checkpoint:
    """What a checkpoint's headers say: every tensor, and their bytes by dtype and by the project's pools.

    ``elements`` are the numbers stored: a packed tensor (GPTQ's I32 qweight, MXFP4's U8 blocks) counts its
    stored elements, not the weights it packs; a GGUF tensor counts its weights (its shape is theirs).
    ``data_bytes`` is what the files hold after their headers (GGUF's alignment padding included).
    """

    format: str                                 # "safetensors" or "gguf"
    files: "tuple[str, ...]"
    tensors: "tuple[Tensor, ...]"
    total_bytes: int
    elements: int
    by_dtype: "dict[str, int]"
    by_pool: "dict[str, int]"
    header_bytes: int
    data_bytes: int
    metadata: "dict[str, Any]" = field(default_factory=dict)
    architecture: "dict[str, Any]" = field(default_factory=dict)
    notes: "tuple[str, ...]" = ()

    @property
    def layers_bytes(self) -> int:
        """The transformer layers' bytes: attention (or the layer's other mixer), MLP and norms."""
        return sum(self.by_pool.get(pool, 0) for pool in LAYER_POOLS)

    def as_dict(self) -> "dict[str, Any]":
        """The JSON of ``python -m pycore header=PATH --json``: everything but the per-tensor list."""
        return {"format": self.format, "files": list(self.files), "tensors": len(self.tensors),
                "total_bytes": self.total_bytes, "elements": self.elements, "by_dtype": dict(self.by_dtype),
                "by_pool": dict(self.by_pool), "layers_bytes": self.layers_bytes,
                "header_bytes": self.header_bytes, "data_bytes": self.data_bytes,
                "architecture": dict(self.architecture), "notes": list(self.notes),
                "source": "the checkpoint's headers: " + ", ".join(self.files)}


# --- pools by tensor name ------------------------------------------------------------------------------

_LAYER = re.compile(r"(?:^|\.)(?:layers|layer|h|blocks|block|blk|decoder_layers)\.\d+\.")
_VISION = {"vision_tower", "vision_model", "visual", "vision_encoder", "vision", "multi_modal_projector",
           "mm_projector", "image_newline", "vision_embed_tokens", "patch_embed", "vision_projection"}
_EMBEDDING = {"embed_tokens", "wte", "wpe", "word_embeddings", "position_embeddings", "token_type_embeddings",
              "tok_embeddings", "embed_in", "token_embd", "token_embd_norm", "embeddings", "shared",
              "embed_positions", "position_embd", "embed_tokens_per_layer", "per_layer_token_embd"}
_HEAD = {"lm_head", "embed_out", "output", "score", "classifier", "pooler", "cls", "qa_outputs", "output_norm"}
_ATTENTION = {"self_attn", "attn", "attention", "self_attention", "cross_attn", "encoder_attn", "linear_attn",
              "mixer", "mamba", "ssm", "conv", "short_conv", "q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj",
              "c_attn", "query_key_value", "wq", "wk", "wv", "wo", "selfattention", "encdecattention",
              "time_mix", "shortconv"}
_MLP = {"mlp", "feed_forward", "ffn", "block_sparse_moe", "moe", "c_fc", "gate_proj", "up_proj", "down_proj",
        "w1", "w2", "w3", "fc1", "fc2", "densereludense", "intermediate", "output", "shared_expert",
        "shared_experts", "channel_mix"}
_NORM = re.compile(r"^(?:ln(?:_\w+|\d*)|.*norm.*)$")


def _is_expert(part: str) -> bool:
    """Routed experts (HF ``experts``, GGUF ``ffn_*_exps``); shared experts are dense MLP, always active."""
    return part == "experts" or (part.startswith("ffn_") and part.endswith("_exps"))


def _layer_pool(parts: "list[str]") -> str:
    """Inside a numbered layer: norms, then the outermost part naming attention (or another mixer) or MLP."""
    if any(_NORM.match(part) for part in parts):
        return "norms"
    for part in parts:
        if part in _ATTENTION or part.startswith(("attn_", "ssm_", "time_mix")):
            return "attention"
        if part in _MLP or part.startswith("ffn_"):
            return "mlp"
    return "other"


def pool_of(name: str) -> str:
    """The project's pool a tensor's bytes belong to, from its name (Hugging Face's or GGUF's).

    Quantization's extra tensors (GPTQ's qweight, qzeros, scales, g_idx; FP8's weight_scale_inv) carry the
    name of the weight they belong to and go where it goes. Names differing only in numbers share a pool.
    """
    return _pool_of(_DIGITS.sub("0", name))


_DIGITS = re.compile(r"\d+")


@lru_cache(maxsize=4096)
def _pool_of(name: str) -> str:
    parts = name.lower().split(".")
    if name.startswith(("v.", "mm.")) or any(part in _VISION for part in parts):
        return "vision"
    if any(_is_expert(part) for part in parts):
        return "experts"
    layer = _LAYER.search(name.lower())
    if layer:
        return _layer_pool(name.lower()[layer.end():].split("."))
    if any(part in _EMBEDDING for part in parts):
        return "embedding"
    if any(part in _HEAD or _NORM.match(part) for part in parts):
        return "head"                   # the output head and the final norm, as ParameterCount.head
    return "other"


def summarize(fmt: str, files: "list[str]", tensors: "list[Tensor]", sizes: "tuple[int, int]",
              metadata: "dict[str, Any] | None" = None, notes: "tuple[str, ...]" = ()) -> Checkpoint:
    """The Checkpoint of these tensors; ``sizes`` = (header bytes read, data bytes in the files)."""
    by_dtype: "dict[str, int]" = {}
    by_pool = {pool: 0 for pool in POOLS}
    elements = 0
    for tensor in tensors:
        by_dtype[tensor.dtype] = by_dtype.get(tensor.dtype, 0) + tensor.nbytes
        by_pool[pool_of(tensor.name)] += tensor.nbytes
        elements += _product(tensor.shape)
    meta = metadata or {}
    return Checkpoint(fmt, tuple(files), tuple(tensors), sum(by_dtype.values()), elements,
                      dict(sorted(by_dtype.items(), key=lambda item: -item[1])),
                      {pool: size for pool, size in by_pool.items() if size}, sizes[0], sizes[1], meta,
                      _architecture(meta), notes)


def _architecture(metadata: "dict[str, Any]") -> "dict[str, Any]":
    """GGUF's architecture keys: general.architecture and the ``<arch>.`` keys the estimate reads."""
    arch = metadata.get("general.architecture")
    if not isinstance(arch, str):
        return {}
    found: "dict[str, Any]" = {"architecture": arch}
    for key in ARCHITECTURE_KEYS:
        if f"{arch}.{key}" in metadata:
            found[key] = metadata[f"{arch}.{key}"]
    tokens = metadata.get("tokenizer.ggml.tokens")
    if "vocab_size" not in found and isinstance(tokens, dict) and "length" in tokens:
        found["vocab_size"] = tokens["length"]
    return found


# GGUF's general.architecture -> the Hugging Face model_type of the same layers (llama.cpp's convert_hf_to_gguf.py
# writes Llama and Mistral checkpoints as "llama"), and GGUF's "<arch>." keys -> config.json's
GGUF_MODEL_TYPES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "qwen2moe": "qwen2_moe",
                    "qwen3moe": "qwen3_moe"}
GGUF_CONFIG_KEYS = {"block_count": "num_hidden_layers", "embedding_length": "hidden_size",
                    "feed_forward_length": "intermediate_size", "attention.head_count": "num_attention_heads",
                    "attention.head_count_kv": "num_key_value_heads", "attention.key_length": "head_dim",
                    "context_length": "max_position_embeddings", "vocab_size": "vocab_size",
                    "expert_count": "num_experts", "expert_used_count": "num_experts_per_tok",
                    "expert_feed_forward_length": "moe_intermediate_size"}


def gguf_config(found: "Checkpoint") -> "dict[str, Any] | None":
    """The config.json a GGUF file's metadata describes, for the families whose layers its keys say whole
    (GGUF_MODEL_TYPES); its embedding is tied when the file has no separate output.weight. None otherwise."""
    arch = found.architecture
    model_type = GGUF_MODEL_TYPES.get(str(arch.get("architecture")))
    if found.format != "gguf" or model_type is None:
        return None
    config: "dict[str, Any]" = {"model_type": model_type, **{GGUF_CONFIG_KEYS[key]: value for key, value in arch.items()
                                                            if key in GGUF_CONFIG_KEYS}}
    if model_type == "qwen2_moe" and "num_experts" in config:
        config["shared_expert_intermediate_size"] = arch.get("expert_shared_feed_forward_length", 0)
    config["tie_word_embeddings"] = not any(tensor.name == "output.weight" for tensor in found.tensors)
    config["_name_or_path"] = found.files[0] if found.files else ""       # the model is called by its file
    return config


def _product(shape: "tuple[int, ...]") -> int:
    total = 1
    for size in shape:
        total *= size
    return total


def _shown(name: str) -> str:
    """A name from the file, safe to put in a message: printable, at most 80 characters."""
    text = name[:80] if name[:80].isprintable() else "".join(c if c.isprintable() else "?" for c in name[:80])
    return repr(text + ("..." if len(name) > 80 else ""))


# --- safetensors ---------------------------------------------------------------------------------------

def safetensors_length(prefix: bytes) -> int:
    """The JSON header's length from a safetensors file's first 8 bytes, refused past 100,000,000."""
    if len(prefix) < 8:
        raise _error(f"{len(prefix)} bytes: a safetensors file starts with an 8-byte header length")
    length = int(struct.unpack_from("<Q", prefix)[0])
    if length > MAX_HEADER:
        raise _error(f"the header length is {length:,} bytes, over safetensors' limit of {MAX_HEADER:,} "
                     "(not a safetensors file?)")
    if length < 2:
        raise _error(f"the header length is {length} bytes, too short for a JSON object")
    return length


def _unique(pairs: "list[tuple[str, Any]]") -> "dict[str, Any]":
    found: "dict[str, Any]" = {}
    for key, value in pairs:
        if key in found:
            raise _error(f"the JSON names {_shown(key)} twice")
        found[key] = value
    return found


def _no_constant(word: str) -> None:
    raise _error(f"the JSON holds {word}, which JSON does not allow")


def _check_depth(raw: bytes) -> None:
    """Refuse JSON nested deeper than MAX_JSON_DEPTH or with too many values, before parsing it.

    Escaped backslashes and quotes go first, then the strings, then all but brackets; each pass of removing
    innermost ``[]`` and ``{}`` takes at least one level off. Every step runs in C, in bounded memory.
    """
    if raw.count(b",") > MAX_JSON_VALUES:
        raise _error(f"the JSON holds over {MAX_JSON_VALUES:,} values")
    bare = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    if bare.count(b'"') > 2 * MAX_JSON_VALUES:
        raise _error(f"the JSON holds over {MAX_JSON_VALUES:,} strings")
    brackets = re.sub(rb'"[^"]*"', b"", bare).translate(None, _NOT_BRACKETS)
    if len(brackets) > 2 * MAX_JSON_VALUES:
        raise _error(f"the JSON holds over {MAX_JSON_VALUES:,} arrays and objects")
    for _ in range(MAX_JSON_DEPTH):
        brackets = brackets.replace(b"[]", b"").replace(b"{}", b"")
        if not brackets:
            return
    raise _error(f"the JSON is nested deeper than {MAX_JSON_DEPTH} levels, or its brackets do not match")


_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")


def parse_json(raw: bytes, what: str) -> "dict[str, Any]":
    """A JSON object from bounded bytes: UTF-8, depth and size checked, no repeated keys, NaN refused."""
    if len(raw) > MAX_HEADER:
        raise _error(f"{what} is {len(raw):,} bytes, over {MAX_HEADER:,}")
    _check_depth(raw)
    try:
        text = raw.decode("utf-8")
        value = json.loads(text, object_pairs_hook=_unique, parse_constant=_no_constant)
    except UnicodeDecodeError as error:
        raise _error(f"{what} is not UTF-8 (byte {error.start:,})") from None
    except json.JSONDecodeError as error:
        raise _error(f"{what} is not JSON: {error.msg} at character {error.pos:,}") from None
    except (ValueError, RecursionError) as error:     # an integer of over 4,300 digits; nesting
        if isinstance(error, FieldError):
            raise
        raise _error(f"{what} is not JSON this reader takes: {str(error)[:80]}") from None
    if not isinstance(value, dict):
        raise _error(f"{what} is JSON but not an object")
    return value


def _whole(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise _error(f"{what} is {str(value)[:40]!s}, not a whole number from 0 to 2^63")
    return value


def _safetensors_tensor(name: str, entry: Any, file: str) -> "tuple[Tensor, int, int]":
    """One header entry as a Tensor and its (begin, end), its byte size checked against shape x dtype."""
    if len(name) > MAX_NAME:
        raise _error(f"a tensor's name is {len(name):,} characters, over {MAX_NAME:,}")
    if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= set(entry):
        raise _error(f"tensor {_shown(name)} needs dtype, shape and data_offsets")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if dtype not in SAFETENSORS_BITS:
        raise _error(f"tensor {_shown(name)} has dtype {_shown(str(dtype))}; safetensors defines "
                     + ", ".join(SAFETENSORS_BITS))
    if not isinstance(shape, list) or len(shape) > MAX_DIMS:
        raise _error(f"tensor {_shown(name)}'s shape is not a list of at most {MAX_DIMS} sizes")
    dims = tuple(_whole(size, f"tensor {_shown(name)}'s shape entry") for size in shape)
    if not isinstance(offsets, list) or len(offsets) != 2:
        raise _error(f"tensor {_shown(name)}'s data_offsets is not [begin, end]")
    begin, end = (_whole(at, f"tensor {_shown(name)}'s data offset") for at in offsets)
    bits = _product(dims) * SAFETENSORS_BITS[dtype]
    if bits % 8:
        raise _error(f"tensor {_shown(name)}: {_product(dims):,} {dtype} elements are not a whole number of bytes")
    if end < begin or end - begin != bits // 8:
        raise _error(f"tensor {_shown(name)}: data_offsets [{begin}, {end}] hold {end - begin:,} bytes, but "
                     f"shape {list(dims)} of {dtype} takes {bits // 8:,}")
    return Tensor(name, dtype, dims, bits // 8, file), begin, end


def _safetensors_tensors(header: "dict[str, Any]", file: str) -> "tuple[list[Tensor], int]":
    """The header's tensors in offset order, and where their data ends; the data must leave no gaps."""
    if len(header) > MAX_TENSORS + 1:
        raise _error(f"the header lists {len(header):,} tensors, over {MAX_TENSORS:,}")
    placed = sorted((_safetensors_tensor(name, entry, file) for name, entry in header.items()
                     if name != "__metadata__"), key=lambda item: (item[1], item[2]))
    at = 0
    for tensor, begin, end in placed:
        if begin != at:
            raise _error(f"tensor {_shown(tensor.name)} starts at data byte {begin:,}, expected {at:,} "
                         "(safetensors lays tensors out with no gaps or overlaps)")
        at = end
    return [tensor for tensor, _, _ in placed], at


def _string_map(value: Any) -> "dict[str, Any]":
    if not isinstance(value, dict) or not all(isinstance(item, str) for item in value.values()):
        raise _error("__metadata__ is not a map of strings")
    return {key: item[:KEEP_STRING] for key, item in value.items()}


def read_safetensors(data: bytes, file: str = "", file_size: "int | None" = None) -> Checkpoint:
    """A safetensors file's tensors from its first bytes (8 + the header's length; more is ignored).

    With ``file_size``, the file must end where its last tensor does (safetensors refuses it otherwise).
    """
    length = safetensors_length(data[:8])
    if len(data) < 8 + length:
        raise Truncated(8 + length, f"the {length:,}-byte JSON header", len(data))
    raw = bytes(data[8:8 + length])
    if not raw.startswith(b"{"):
        raise _error("the header does not start with '{' (safetensors requires it)")
    header = parse_json(raw, "the header")
    metadata = _string_map(header.get("__metadata__", {}))
    tensors, end = _safetensors_tensors(header, file)
    if file_size is not None and file_size != 8 + length + end:
        raise _error(f"{_shown(file)} is {file_size:,} bytes, but its header and tensors take {8 + length + end:,} "
                     "(truncated or padded)")
    return summarize("safetensors", [file], tensors, (8 + length, end), metadata)


def read_index(raw: bytes) -> "tuple[dict[str, str], int | None]":
    """model.safetensors.index.json: tensor -> shard file, and metadata.total_size where given."""
    index = parse_json(raw, "the index")
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise _error("the index has no weight_map (tensor name -> shard file)")
    if len(weight_map) > MAX_TENSORS:
        raise _error(f"the index maps {len(weight_map):,} tensors, over {MAX_TENSORS:,}")
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or not shard or len(shard) > MAX_NAME or "/" in shard or "\\" in shard \
                or shard in (".", ".."):
            raise _error(f"the index maps {_shown(name)} to {_shown(str(shard))}, not a file name in its folder")
    meta = index.get("metadata")
    total = meta.get("total_size") if isinstance(meta, dict) else None
    return weight_map, total if isinstance(total, int) and not isinstance(total, bool) else None


def combine(parts: "list[Checkpoint]", weight_map: "dict[str, str] | None" = None,
            total_size: "int | None" = None) -> Checkpoint:
    """Several files' tensors as one checkpoint (shards, GGUF splits), checked against the index if given."""
    if not parts:
        raise _error("no checkpoint files")
    seen: "dict[str, str]" = {}
    tensors: "list[Tensor]" = []
    for part in parts:
        for tensor in part.tensors:
            if tensor.name in seen:
                raise _error(f"tensor {_shown(tensor.name)} is in both {_shown(seen[tensor.name])} and "
                             f"{_shown(tensor.file)}")
            seen[tensor.name] = tensor.file
        tensors += part.tensors
    if len(tensors) > MAX_TENSORS:
        raise _error(f"the files hold {len(tensors):,} tensors, over {MAX_TENSORS:,}")
    notes = [note for part in parts for note in part.notes]
    if weight_map is not None:
        notes += _against_index(seen, weight_map)
    total = sum(tensor.nbytes for tensor in tensors)
    if total_size is not None and total_size != total:
        notes.append(f"the index's metadata.total_size says {total_size:,} bytes; the shards' tensors take {total:,}")
    metadata = parts[0].metadata if len(parts) == 1 or parts[0].format == "gguf" else {}
    sizes = (sum(part.header_bytes for part in parts), sum(part.data_bytes for part in parts))
    return summarize(parts[0].format, [f for part in parts for f in part.files], tensors, sizes, metadata,
                     tuple(notes))


def _against_index(found: "dict[str, str]", weight_map: "dict[str, str]") -> "list[str]":
    """Refuse a tensor the index puts in a shard whose header lacks it; note tensors the index leaves out."""
    for name, shard in weight_map.items():
        if found.get(name) != shard:
            where = f"it is in {_shown(found[name])}" if name in found else "no shard's header has it"
            raise _error(f"the index puts tensor {_shown(name)} in {_shown(shard)}, but {where}")
    extra = [name for name in found if name not in weight_map]
    if not extra:
        return []
    return [f"{len(extra):,} tensors in the shards are not in the index's weight_map (counted), "
            f"the first {_shown(extra[0])}"]


# --- GGUF ----------------------------------------------------------------------------------------------

_STRUCTS = {order + fmt: struct.Struct(order + fmt) for order in "<>" for fmt in "BbHhIiQqfd"}


class _Cursor:
    """Bounded reads from a GGUF header's bytes; running past the end raises Truncated."""

    def __init__(self, data: bytes, order: str) -> None:
        self.data = data
        self.order = order
        self.at = 0

    def skip(self, size: int, what: str) -> None:
        if self.at + size > len(self.data):
            raise Truncated(self.at + size, what, len(self.data))
        self.at += size

    def take(self, size: int, what: str) -> bytes:
        self.skip(size, what)
        return self.data[self.at - size:self.at]

    def number(self, fmt: str, what: str) -> Any:
        packed = _STRUCTS[self.order + fmt]
        if self.at + packed.size > len(self.data):
            raise Truncated(self.at + packed.size, what, len(self.data))
        self.at += packed.size
        return packed.unpack_from(self.data, self.at - packed.size)[0]

    def string(self, what: str, limit: int = MAX_HEADER) -> str:
        size = self.number("Q", what)
        if size > limit:
            raise _error(f"{what} is {size:,} bytes long, over {limit:,}")
        try:
            return self.take(size, what).decode("utf-8")
        except UnicodeDecodeError:
            raise _error(f"{what} is not UTF-8") from None

    def skip_string(self, what: str) -> int:
        size = self.number("Q", what)
        if size > MAX_HEADER:
            raise _error(f"{what} is {size:,} bytes long, over {MAX_HEADER:,}")
        self.skip(size, what)
        return int(size)

    def skip_strings(self, count: int, what: str) -> None:
        """``count`` strings passed over in one tight loop (a vocabulary's tokens and merges)."""
        unpack = struct.Struct(self.order + "Q").unpack_from
        data, at, end = self.data, self.at, len(self.data)
        for _ in range(count):
            if at + 8 > end:
                raise Truncated(at + 8, what, end)
            at += 8 + unpack(data, at)[0]
            if at > end:
                raise Truncated(at, what, end)
        self.at = at


def _gguf_value(cursor: _Cursor, kind: int, what: str, depth: int = 0) -> Any:
    """One GGUF value of type ``kind``: long strings and arrays are kept as their length."""
    if kind not in GGUF_VALUE_TYPES:
        raise _error(f"{what} has value type {kind}; GGUF defines 0 to 12")
    name, fmt = GGUF_VALUE_TYPES[kind]
    if fmt:
        value = cursor.number(fmt, what)
        return bool(value) if name == "bool" else value
    if name == "str":
        start = cursor.at
        size = cursor.skip_string(what)
        if size > KEEP_STRING:
            return {"type": "str", "length": size}
        cursor.at = start
        return cursor.string(what)
    if depth >= MAX_ARRAY_DEPTH:
        raise _error(f"{what} nests arrays deeper than {MAX_ARRAY_DEPTH}")
    return _gguf_array(cursor, what, depth)


def _gguf_array(cursor: _Cursor, what: str, depth: int) -> Any:
    kind = cursor.number("I", what)
    count = cursor.number("Q", what)
    if count > MAX_ARRAY:
        raise _error(f"{what} is an array of {count:,}, over {MAX_ARRAY:,}")
    if kind not in GGUF_VALUE_TYPES:
        raise _error(f"{what} is an array of value type {kind}; GGUF defines 0 to 12")
    if kind == 9 and count > MAX_NESTED:
        raise _error(f"{what} is an array of {count:,} arrays; this reader takes {MAX_NESTED:,} (llama.cpp none)")
    name, fmt = GGUF_VALUE_TYPES[kind]
    if fmt and count > KEEP_ARRAY:                  # fixed-size items: skipped in one step
        cursor.skip(count * struct.calcsize(fmt), what)
    elif count > KEEP_ARRAY and name == "str":
        cursor.skip_strings(count, what)
    elif count > KEEP_ARRAY:
        for _ in range(count):
            _gguf_value(cursor, kind, what, depth + 1)
    else:
        return [_gguf_value(cursor, kind, what, depth + 1) for _ in range(count)]
    return {"type": name, "length": count}


def _gguf_start(cursor: _Cursor) -> "tuple[int, int, int]":
    """(version, tensor count, key/value count) after the magic; the byte order is set from the version."""
    magic = cursor.take(4, "the magic")
    if magic != b"GGUF":
        raise _error(f"not a GGUF file: it starts with {_shown(magic.decode('latin-1'))}, not 'GGUF'")
    raw = cursor.take(4, "the version")
    if raw[:2] == b"\0\0" and raw[2:] != b"\0\0":     # written on a machine of the other byte order
        cursor.order = ">"
    version = struct.unpack(cursor.order + "I", raw)[0]
    if version not in (2, 3):
        raise _error(f"GGUF version {version}; this reader takes versions 2 and 3 (llama.cpp refuses 1)")
    tensors = cursor.number("Q", "the tensor count")
    pairs = cursor.number("Q", "the key/value count")
    if tensors > MAX_TENSORS:
        raise _error(f"the header lists {tensors:,} tensors, over {MAX_TENSORS:,}")
    if pairs > MAX_TENSORS:
        raise _error(f"the header lists {pairs:,} metadata keys, over {MAX_TENSORS:,}")
    return int(version), int(tensors), int(pairs)


def _gguf_metadata(cursor: _Cursor, pairs: int) -> "dict[str, Any]":
    metadata: "dict[str, Any]" = {}
    for number in range(pairs):
        key = cursor.string(f"metadata key {number}", MAX_NAME)
        if not key or key in metadata:
            raise _error(f"metadata key {number} {_shown(key)} is empty or given twice")
        what = f"key {_shown(key)}"
        metadata[key] = _gguf_value(cursor, cursor.number("I", what), what)
    alignment = metadata.get("general.alignment", 32)
    if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment <= 0 \
            or alignment & (alignment - 1):
        raise _error(f"general.alignment is {str(alignment)[:40]}, not a power of 2")
    return metadata


def _gguf_tensor(cursor: _Cursor, number: int, file: str) -> "tuple[Tensor, int]":
    """One tensor info: (Tensor, its offset in the data section)."""
    name = cursor.string(f"tensor {number}'s name", MAX_NAME)
    what = f"tensor {_shown(name)}"
    dims = cursor.number("I", what)
    if dims > 4:
        raise _error(f"{what} has {dims} dimensions; GGUF allows at most 4 (GGML_MAX_DIMS)")
    shape = struct.unpack(f"{cursor.order}{dims}Q", cursor.take(8 * dims, what))
    kind = cursor.number("I", what)
    if kind not in GGML_TYPES:
        raise _error(f"{what} has ggml type {kind}, which gguf 0.19.0 does not define")
    type_name, block, block_bytes = GGML_TYPES[kind]
    if any(size >= 2**63 for size in shape):
        raise _error(f"{what} has a dimension of 2^63 or more")
    if shape and shape[0] % block:
        raise _error(f"{what} has {shape[0]:,} elements a row, not a whole number of {type_name}'s "
                     f"{block}-element blocks")
    offset = cursor.number("Q", what)
    return Tensor(name, type_name, shape, _product(shape) // block * block_bytes, file), int(offset)


def read_gguf(data: bytes, file: str = "", file_size: "int | None" = None) -> Checkpoint:
    """A GGUF file's tensors and metadata from its first bytes; Truncated if the header goes on past them.

    With ``file_size``, the file must hold the data section the tensor infos describe.
    """
    cursor = _Cursor(data, "<")
    _, count, pairs = _gguf_start(cursor)
    metadata = _gguf_metadata(cursor, pairs)
    alignment = int(metadata.get("general.alignment", 32))
    tensors: "list[Tensor]" = []
    names: "set[str]" = set()
    at = end = 0
    for number in range(count):
        tensor, offset = _gguf_tensor(cursor, number, file)
        if offset != at:
            raise _error(f"tensor {_shown(tensor.name)} is at data offset {offset:,}, expected {at:,} (each "
                         f"tensor follows the one before, padded to {alignment})")
        if tensor.name in names:
            raise _error(f"tensor {_shown(tensor.name)} is listed twice")
        names.add(tensor.name)
        tensors.append(tensor)
        end = at + tensor.nbytes
        at += -(-tensor.nbytes // alignment) * alignment
    start = -(-cursor.at // alignment) * alignment if count else cursor.at
    if file_size is not None and file_size < start + end:
        raise _error(f"{_shown(file)} is {file_size:,} bytes, but its tensors end at byte {start + end:,} "
                     "(truncated?)")
    data_bytes = (file_size if file_size is not None else start + at) - start
    return summarize("gguf", [file], tensors, (cursor.at, data_bytes), metadata)


# --- files ---------------------------------------------------------------------------------------------

def _read_at(path: str, size: int) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(size)


def read_file(path: str, reader: "Callable[[str, int], bytes]" = _read_at) -> Checkpoint:
    """One .safetensors or .gguf file (told apart by its first bytes), reading only its header bytes."""
    size = os.path.getsize(path)
    name = os.path.basename(path)
    first = reader(path, min(size, 8))
    if first[:4] != b"GGUF":
        length = safetensors_length(first)
        if size < 8 + length:
            raise _error(f"{_shown(name)} is {size:,} bytes, shorter than its {length:,}-byte header says")
        return read_safetensors(reader(path, 8 + length), name, size)
    first = reader(path, min(size, GGUF_FIRST_READ))
    while True:
        try:
            return read_gguf(first, name, size)
        except Truncated as short:
            if len(first) >= size or short.needed > MAX_HEADER:
                limit = "where the file ends" if len(first) >= size else f"over {MAX_HEADER:,} bytes"
                raise _error(f"{_shown(name)}: the GGUF header runs {limit}: {short.message}") from None
            first = reader(path, min(size, MAX_HEADER, max(short.needed, 2 * len(first))))


def read_path(path: str) -> Checkpoint:
    """A .safetensors or .gguf file, a model.safetensors.index.json with its shards beside it, or a folder
    of either (its index if it has one, else every .safetensors file, else every .gguf file)."""
    if os.path.isdir(path):
        names = sorted(os.listdir(path))
        if "model.safetensors.index.json" in names:
            return read_path(os.path.join(path, "model.safetensors.index.json"))
        for suffix in (".safetensors", ".gguf"):
            found = [os.path.join(path, name) for name in names
                     if name.endswith(suffix) and os.path.isfile(os.path.join(path, name))]
            if found:
                return combine([read_file(file) for file in found])
        raise _error(f"{_shown(path)} has no model.safetensors.index.json, .safetensors or .gguf file")
    if not os.path.isfile(path):
        raise _error(f"{_shown(path)} is not a regular file" if os.path.exists(path)
                     else f"no such file or folder: {_shown(path)}")
    if path.endswith(".json"):
        size = os.path.getsize(path)
        if size > MAX_HEADER:
            raise _error(f"{_shown(path)} is {size:,} bytes, over {MAX_HEADER:,} for an index")
        weight_map, total = read_index(_read_at(path, size))
        folder = os.path.dirname(path)
        shards = list(dict.fromkeys(weight_map.values()))
        missing = [shard for shard in shards if not os.path.isfile(os.path.join(folder, shard))]
        if missing:
            raise _error(f"the index names {_shown(missing[0])}, which is not beside it"
                         + (f" ({len(missing)} shards missing)" if len(missing) > 1 else ""))
        return combine([read_file(os.path.join(folder, shard)) for shard in shards], weight_map, total)
    return read_file(path)
