"""Exact weight bytes from a checkpoint's headers (issue 30): pycore.model.checkpoint and ``header=PATH``.

Every checkpoint here is a file the test writes itself, twice where the packages are installed: once with the
standard library (struct and json, as the formats' specifications lay them out) and once with the formats'
own writers from PyPI (``safetensors``' ``serialize_file``, gguf-py's ``GGUFWriter``, tests/requirements.txt).
The expected bytes are the sum of the tensors' bytes as the writer laid them out, read back from the file's
size: a safetensors file is 8 bytes, the N-byte header those 8 bytes give, and the tensors with no gaps
(safetensors/src/tensor.rs refuses anything else), so its weights are size - 8 - N; a GGUF file's tensors
start at the header's end rounded up to the alignment (32) and each is padded to it (ggml/src/gguf.cpp), so
with every tensor a multiple of 32 bytes its weights are size - that start.
"""

import ctypes
import json
import os
import struct
import time
from pathlib import Path

import pytest
from fuzz_counts import count_fuzz
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pycore.base.errors import FieldError
from pycore.model import checkpoint
from pycore.model.checkpoint import GGML_TYPES, SAFETENSORS_BITS, pool_of, read_gguf, read_path, read_safetensors
from pycore.output import cli

# --- writers (standard library) --------------------------------------------------------------------------


def nbytes(dtype, shape):
    count = 1
    for size in shape:
        count *= size
    return count * SAFETENSORS_BITS[dtype] // 8


def safetensors_bytes(tensors, metadata=None):
    """A safetensors file as safetensors' serializer lays it out: the header padded with spaces to 8 bytes."""
    header, at = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape) in tensors.items():
        size = nbytes(dtype, shape)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [at, at + size]}
        at += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + bytes(at)


def header_only(header):
    """The 8 bytes and the JSON header, no data: for headers whose shapes are the point."""
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw


def entry(dtype, shape, offsets=(0, 4)):
    return {"a": {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}}


def write(path, data):
    path.write_bytes(data)
    return str(path)


def gguf_string(text):
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def gguf_value(kind, value):
    """A GGUF value of type ``kind`` (gguf.cpp's GGUF_TYPE_*); an array is (item kind, items)."""
    formats = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
    if kind == 8:
        return gguf_string(value)
    if kind == 9:
        item_kind, items = value
        return struct.pack("<IQ", item_kind, len(items)) + b"".join(gguf_value(item_kind, item) for item in items)
    return struct.pack("<" + formats[kind], value)


def gguf_bytes(metadata, tensors, alignment=32, version=3):
    """A GGUF file: metadata = [(key, kind, value)], tensors = [(name, ggml type id, ne)] (ne[0] first)."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(metadata))
    for key, kind, value in metadata:
        out += gguf_string(key) + struct.pack("<I", kind) + gguf_value(kind, value)
    at, sizes = 0, []
    for name, kind, ne in tensors:
        _, block, block_bytes = GGML_TYPES[kind]
        count = 1
        for size in ne:
            count *= size
        sizes.append(count // block * block_bytes)
        out += gguf_string(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
        out += struct.pack("<IQ", kind, at)
        at += -(-sizes[-1] // alignment) * alignment
    out += bytes(-len(out) % alignment)
    for size in sizes:
        out += bytes(size + (-size % alignment))
    return out


def weights_in_safetensors(path):
    """The file's size less its 8 bytes and header: the bytes of its tensors as the writer laid them out."""
    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
    return os.path.getsize(path) - 8 - length


# --- the checkpoints -------------------------------------------------------------------------------------

H, KV, FFN, VOCAB, LAYERS = 64, 32, 128, 256, 2


def llama(dtype="BF16", layers=LAYERS):
    """A small Llama's tensors, as transformers names them: name -> (dtype, shape)."""
    tensors = {"model.embed_tokens.weight": (dtype, (VOCAB, H))}
    for i in range(layers):
        p = f"model.layers.{i}."
        tensors |= {p + "self_attn.q_proj.weight": (dtype, (H, H)), p + "self_attn.k_proj.weight": (dtype, (KV, H)),
                    p + "self_attn.v_proj.weight": (dtype, (KV, H)), p + "self_attn.o_proj.weight": (dtype, (H, H)),
                    p + "mlp.gate_proj.weight": (dtype, (FFN, H)), p + "mlp.up_proj.weight": (dtype, (FFN, H)),
                    p + "mlp.down_proj.weight": (dtype, (H, FFN)), p + "input_layernorm.weight": (dtype, (H,)),
                    p + "post_attention_layernorm.weight": (dtype, (H,))}
    return tensors | {"model.norm.weight": (dtype, (H,)), "lm_head.weight": (dtype, (VOCAB, H))}


def llama_pools(size=2, layers=LAYERS):
    """The same Llama's bytes by pool, from its shapes: 2 bytes a number in bf16."""
    return {"embedding": VOCAB * H * size, "attention": layers * (2 * H * H + 2 * KV * H) * size,
            "mlp": layers * 3 * FFN * H * size, "norms": layers * 2 * H * size, "head": (H + VOCAB * H) * size}


def fp8_moe():
    """A DeepSeek-V3-style FP8 checkpoint: F8_E4M3 weights with F32 weight_scale_inv per 128 x 128 block,
    bf16 embeddings, norms, head and router; layer 1 has 4 routed experts and a shared expert."""
    h, ffn = 256, 384
    tensors = {"model.embed_tokens.weight": ("BF16", (VOCAB, h))}

    def linear(name, out, inp):
        tensors[name + ".weight"] = ("F8_E4M3", (out, inp))
        tensors[name + ".weight_scale_inv"] = ("F32", (-(-out // 128), -(-inp // 128)))

    for i in range(2):
        p = f"model.layers.{i}."
        for proj in "qkvo":
            linear(p + f"self_attn.{proj}_proj", h, h)
        tensors[p + "input_layernorm.weight"] = ("BF16", (h,))
        tensors[p + "post_attention_layernorm.weight"] = ("BF16", (h,))
        mlp = [p + "mlp"] if i == 0 else [p + "mlp.shared_experts"] + [p + f"mlp.experts.{e}" for e in range(4)]
        for prefix in mlp:
            linear(prefix + ".gate_proj", ffn, h)
            linear(prefix + ".up_proj", ffn, h)
            linear(prefix + ".down_proj", h, ffn)
    tensors["model.layers.1.mlp.gate.weight"] = ("BF16", (4, h))
    tensors["model.norm.weight"] = ("BF16", (h,))
    tensors["lm_head.weight"] = ("BF16", (VOCAB, h))
    return tensors


def fp8_pools():
    h, ffn, scale = 256, 384, lambda out, inp: 4 * -(-out // 128) * -(-inp // 128)
    attention = 2 * 4 * (h * h + scale(h, h))
    mlp_one = 2 * (ffn * h + scale(ffn, h)) + h * ffn + scale(h, ffn)
    return {"embedding": VOCAB * h * 2, "attention": attention, "mlp": 2 * mlp_one + 4 * h * 2,
            "norms": 2 * 2 * h * 2, "experts": 4 * mlp_one, "head": (h + VOCAB * h) * 2}


def mxfp4(experts=4, h=128, ffn=64, heads=4):
    """gpt-oss's layout (openai/gpt-oss-20b's safetensors): MXFP4 experts as U8 blocks of 32 weights in 16 bytes
    with a U8 (E8M0) scale a block, bf16 expert biases, router, attention with its sinks, norms."""
    tensors = {"model.embed_tokens.weight": ("BF16", (VOCAB, h))}
    for i in range(2):
        p = f"model.layers.{i}."
        for proj, out in (("q", h), ("k", h // 2), ("v", h // 2)):
            tensors |= {p + f"self_attn.{proj}_proj.weight": ("BF16", (out, h)),
                        p + f"self_attn.{proj}_proj.bias": ("BF16", (out,))}
        tensors |= {p + "self_attn.o_proj.weight": ("BF16", (h, h)), p + "self_attn.o_proj.bias": ("BF16", (h,)),
                    p + "self_attn.sinks": ("BF16", (heads,)), p + "input_layernorm.weight": ("BF16", (h,)),
                    p + "post_attention_layernorm.weight": ("BF16", (h,)),
                    p + "mlp.router.weight": ("BF16", (experts, h)), p + "mlp.router.bias": ("BF16", (experts,)),
                    p + "mlp.experts.gate_up_proj_blocks": ("U8", (experts, 2 * ffn, h // 32, 16)),
                    p + "mlp.experts.gate_up_proj_scales": ("U8", (experts, 2 * ffn, h // 32)),
                    p + "mlp.experts.gate_up_proj_bias": ("BF16", (experts, 2 * ffn)),
                    p + "mlp.experts.down_proj_blocks": ("U8", (experts, h, ffn // 32, 16)),
                    p + "mlp.experts.down_proj_scales": ("U8", (experts, h, ffn // 32)),
                    p + "mlp.experts.down_proj_bias": ("BF16", (experts, h))}
    return tensors | {"model.norm.weight": ("BF16", (h,)), "lm_head.weight": ("BF16", (VOCAB, h))}


def mxfp4_pools(experts=4, h=128, ffn=64, heads=4):
    # MXFP4: 17 bytes a block of 32 weights (16 of 4-bit values, 1 scale), as ggml's MXFP4 (32, 17)
    expert_weights = 2 * ffn * h + h * ffn
    return {"embedding": VOCAB * h * 2, "attention": 2 * 2 * (2 * h * h + 2 * (h // 2) * h + 2 * h + 2 * (h // 2)
                                                             + heads),
            "norms": 2 * 2 * h * 2, "mlp": 2 * 2 * (experts * h + experts),
            "experts": 2 * experts * (expert_weights // 32 * 17 + 2 * (2 * ffn + h)), "head": (h + VOCAB * h) * 2}


def gptq(bits=4, group=32):
    """An AutoGPTQ-style packed checkpoint: per linear, I32 qweight [in*bits/32, out], I32 qzeros
    [in/group, out*bits/32], F16 scales [in/group, out], I32 g_idx [in]; the rest F16."""
    tensors = {"model.embed_tokens.weight": ("F16", (VOCAB, H))}
    shapes = {"self_attn.q_proj": (H, H), "self_attn.k_proj": (KV, H), "self_attn.v_proj": (KV, H),
              "self_attn.o_proj": (H, H), "mlp.gate_proj": (FFN, H), "mlp.up_proj": (FFN, H), "mlp.down_proj": (H, FFN)}
    for i in range(LAYERS):
        for name, (out, inp) in shapes.items():
            p = f"model.layers.{i}.{name}."
            tensors |= {p + "qweight": ("I32", (inp * bits // 32, out)),
                        p + "qzeros": ("I32", (inp // group, out * bits // 32)),
                        p + "scales": ("F16", (inp // group, out)), p + "g_idx": ("I32", (inp,))}
        for norm in ("input_layernorm", "post_attention_layernorm"):
            tensors[f"model.layers.{i}.{norm}.weight"] = ("F16", (H,))
    return tensors | {"model.norm.weight": ("F16", (H,)), "lm_head.weight": ("F16", (VOCAB, H))}


def gptq_linear_bytes(out, inp, bits=4, group=32):
    return 4 * inp * bits // 32 * out + 4 * inp // group * out * bits // 32 + 2 * inp // group * out + 4 * inp


def total(tensors):
    return sum(nbytes(dtype, shape) for dtype, shape in tensors.values())


# --- safetensors -----------------------------------------------------------------------------------------

def test_bf16_safetensors_gives_its_tensors_bytes_and_pools(tmp_path):
    path = write(tmp_path / "model.safetensors", safetensors_bytes(llama(), {"format": "pt"}))
    found = read_path(path)
    assert found.total_bytes == weights_in_safetensors(path) == total(llama())
    assert found.by_pool == llama_pools()
    assert found.by_dtype == {"BF16": found.total_bytes}
    assert found.elements == found.total_bytes // 2
    assert found.layers_bytes == sum(llama_pools()[p] for p in ("attention", "mlp", "norms"))
    assert found.metadata == {"format": "pt"} and found.files == ("model.safetensors",)
    assert len(found.tensors) == len(llama())


def test_fp8_checkpoint_counts_its_scales_with_their_weights(tmp_path):
    path = write(tmp_path / "fp8.safetensors", safetensors_bytes(fp8_moe()))
    found = read_path(path)
    assert found.total_bytes == weights_in_safetensors(path) == total(fp8_moe())
    assert found.by_pool == fp8_pools()
    assert set(found.by_dtype) == {"F8_E4M3", "F32", "BF16"}
    assert found.by_dtype["F32"] == sum(nbytes(d, s) for n, (d, s) in fp8_moe().items() if n.endswith("_scale_inv"))


def test_mxfp4_experts_as_gpt_oss_stores_them(tmp_path):
    path = write(tmp_path / "gpt-oss.safetensors", safetensors_bytes(mxfp4()))
    found = read_path(path)
    assert found.total_bytes == weights_in_safetensors(path) == total(mxfp4())
    assert found.by_pool == mxfp4_pools()


def test_gptq_packed_checkpoint_counts_what_it_stores(tmp_path):
    path = write(tmp_path / "gptq.safetensors", safetensors_bytes(gptq()))
    found = read_path(path)
    assert found.total_bytes == weights_in_safetensors(path) == total(gptq())
    attention = LAYERS * (2 * gptq_linear_bytes(H, H) + 2 * gptq_linear_bytes(KV, H))
    mlp = LAYERS * (2 * gptq_linear_bytes(FFN, H) + gptq_linear_bytes(H, FFN))
    assert found.by_pool == {"embedding": VOCAB * H * 2, "attention": attention, "mlp": mlp,
                             "norms": LAYERS * 2 * H * 2, "head": (H + VOCAB * H) * 2}
    assert set(found.by_dtype) == {"I32", "F16"}
    # the 4-bit weights pack 8 to an I32: a q_proj's 64 x 64 weights are 512 stored numbers
    q = next(t for t in found.tensors if t.name == "model.layers.0.self_attn.q_proj.qweight")
    assert q.shape == (8, 64) and q.nbytes == 64 * 64 // 2


def shards(tmp_path, total_size=None):
    """The bf16 Llama in two shards with transformers' index beside them."""
    tensors = list(llama().items())
    first, second = dict(tensors[:11]), dict(tensors[11:])
    names = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
    write(tmp_path / names[0], safetensors_bytes(first))
    write(tmp_path / names[1], safetensors_bytes(second))
    weight_map = {name: names[0] for name in first} | {name: names[1] for name in second}
    index = {"metadata": {"total_size": total(llama()) if total_size is None else total_size},
             "weight_map": weight_map}
    return write(tmp_path / "model.safetensors.index.json", json.dumps(index).encode()), names


def test_sharded_checkpoint_by_index_or_folder(tmp_path):
    index, names = shards(tmp_path)
    expected = sum(weights_in_safetensors(str(tmp_path / name)) for name in names)
    for path in (index, str(tmp_path)):
        found = read_path(path)
        assert found.total_bytes == expected == total(llama())
        assert found.by_pool == llama_pools() and found.files == names and found.notes == ()


def test_index_disagreements_are_named(tmp_path):
    index, names = shards(tmp_path, total_size=12345)
    assert "total_size says 12,345 bytes" in read_path(index).notes[0]
    data = json.loads(Path(index).read_text())
    data["weight_map"]["model.layers.9.mlp.up_proj.weight"] = names[0]
    write(tmp_path / "model.safetensors.index.json", json.dumps(data).encode())
    with pytest.raises(FieldError, match="'model.layers.9.mlp.up_proj.weight' in 'model-00001.*no shard's header"):
        read_path(index)
    data["weight_map"] = {"x": "../../etc/passwd"}
    write(tmp_path / "model.safetensors.index.json", json.dumps(data).encode())
    with pytest.raises(FieldError, match="not a file name in its folder"):
        read_path(index)


def test_a_shard_gone_is_named(tmp_path):
    index, names = shards(tmp_path)
    os.remove(tmp_path / names[1])
    with pytest.raises(FieldError, match="model-00002-of-00002.safetensors', which is not beside it"):
        read_path(index)


def test_every_safetensors_dtype_and_a_sub_byte_one(tmp_path):
    tensors = {f"t.{dtype}": (dtype, (4, 6)) for dtype in SAFETENSORS_BITS}
    found = read_path(write(tmp_path / "all.safetensors", safetensors_bytes(tensors)))
    assert found.by_dtype == {dtype: 24 * bits // 8 for dtype, bits in SAFETENSORS_BITS.items()}
    with pytest.raises(FieldError, match="3 F4 elements are not a whole number of bytes"):
        read_safetensors(safetensors_bytes({"odd": ("F4", (3,))})[:100])


def test_a_file_that_does_not_end_where_its_tensors_do(tmp_path):
    data = safetensors_bytes(llama(layers=1))
    with pytest.raises(FieldError, match="header and tensors take"):
        read_path(write(tmp_path / "short.safetensors", data[:-1]))
    with pytest.raises(FieldError, match="header and tensors take"):
        read_path(write(tmp_path / "long.safetensors", data + b"\0"))


def test_only_the_header_bytes_are_read(tmp_path):
    path = write(tmp_path / "m.safetensors", safetensors_bytes(llama()))
    asked = []

    def reader(file, size):
        asked.append(size)
        with open(file, "rb") as handle:
            return handle.read(size)

    checkpoint.read_file(path, reader)
    (length,) = struct.unpack("<Q", Path(path).read_bytes()[:8])
    assert asked == [8, 8 + length]


# --- GGUF ------------------------------------------------------------------------------------------------

Q4_K, Q5_K, Q6_K, Q8_0, IQ4_XS, F32, F16 = 12, 13, 14, 8, 23, 0, 1
GGUF_TENSORS = [("token_embd.weight", Q4_K, (256, 64)), ("blk.0.attn_norm.weight", F32, (256,)),
                ("blk.0.attn_q.weight", Q8_0, (256, 256)), ("blk.0.attn_k.weight", Q5_K, (256, 128)),
                ("blk.0.attn_v.weight", F16, (256, 128)), ("blk.0.ffn_norm.weight", F32, (256,)),
                ("blk.0.ffn_gate.weight", Q4_K, (256, 512)), ("blk.0.ffn_down.weight", Q6_K, (512, 256)),
                ("blk.0.ffn_gate_exps.weight", IQ4_XS, (256, 128, 4)), ("output_norm.weight", F32, (256,)),
                ("output.weight", Q6_K, (256, 64))]
# bytes = rows x blocks a row x bytes a block (GGML_QUANT_SIZES): each a multiple of 32, so no padding
GGUF_BYTES = {"token_embd.weight": 64 * 144, "blk.0.attn_norm.weight": 1024, "blk.0.attn_q.weight": 256 * 8 * 34,
              "blk.0.attn_k.weight": 128 * 176, "blk.0.attn_v.weight": 256 * 128 * 2, "blk.0.ffn_norm.weight": 1024,
              "blk.0.ffn_gate.weight": 512 * 144, "blk.0.ffn_down.weight": 256 * 2 * 210,
              "blk.0.ffn_gate_exps.weight": 512 * 136, "output_norm.weight": 1024, "output.weight": 64 * 210}
GGUF_METADATA = [("general.architecture", 8, "llama"), ("llama.block_count", 4, 1),
                 ("llama.embedding_length", 4, 256), ("llama.feed_forward_length", 4, 512),
                 ("llama.attention.head_count", 4, 4), ("llama.attention.head_count_kv", 4, 2),
                 ("llama.context_length", 4, 4096), ("llama.expert_count", 4, 4), ("general.alignment", 4, 32),
                 ("tokenizer.ggml.tokens", 9, (8, [f"token{i}" for i in range(100)])),
                 ("tokenizer.ggml.scores", 9, (6, [0.5] * 100)), ("every.u8", 0, 255), ("every.i8", 1, -128),
                 ("every.u16", 2, 65535), ("every.i16", 3, -1), ("every.u32", 4, 2**32 - 1), ("every.i32", 5, -2),
                 ("every.f32", 6, 1.5), ("every.bool", 7, True), ("every.str", 8, "text"), ("every.u64", 10, 2**64 - 1),
                 ("every.i64", 11, -(2**63)), ("every.f64", 12, 0.25),
                 ("every.nested", 9, (9, [(4, [1, 2]), (4, [3])]))]


def test_gguf_with_quantized_types(tmp_path):
    path = write(tmp_path / "model.gguf", gguf_bytes(GGUF_METADATA, GGUF_TENSORS))
    found = read_path(path)
    header = found.header_bytes
    start = header + (-header % 32)
    assert found.total_bytes == os.path.getsize(path) - start == sum(GGUF_BYTES.values())
    assert {t.name: t.nbytes for t in found.tensors} == GGUF_BYTES
    assert found.by_pool == {"embedding": 64 * 144, "norms": 2048, "attention": 69632 + 22528 + 65536,
                             "mlp": 73728 + 107520, "experts": 69632, "head": 1024 + 13440}
    assert found.by_dtype["Q6_K"] == 107520 + 13440 and found.elements == sum(
        256 * n for n in (64, 1, 256, 128, 128, 1, 512, 512, 512, 1, 64))
    assert found.architecture == {"architecture": "llama", "block_count": 1, "embedding_length": 256,
                                  "feed_forward_length": 512, "attention.head_count": 4,
                                  "attention.head_count_kv": 2, "context_length": 4096, "expert_count": 4,
                                  "vocab_size": 100}
    meta = found.metadata
    assert meta["every.u64"] == 2**64 - 1 and meta["every.i64"] == -(2**63) and meta["every.bool"] is True
    assert meta["every.nested"] == [[1, 2], [3]] and meta["tokenizer.ggml.tokens"] == {"type": "str", "length": 100}


def test_a_folder_of_gguf_splits(tmp_path):
    split = [("split.count", 2, 2)]
    write(tmp_path / "m-00001-of-00002.gguf", gguf_bytes(GGUF_METADATA + split, GGUF_TENSORS[:5]))
    write(tmp_path / "m-00002-of-00002.gguf", gguf_bytes(split, GGUF_TENSORS[5:]))
    found = read_path(str(tmp_path))
    assert found.total_bytes == sum(GGUF_BYTES.values()) and found.architecture["block_count"] == 1
    assert found.files == ("m-00001-of-00002.gguf", "m-00002-of-00002.gguf")
    write(tmp_path / "m-00002-of-00002.gguf", gguf_bytes(split, GGUF_TENSORS[4:]))
    with pytest.raises(FieldError, match="tensor 'blk.0.attn_v.weight' is in both 'm-00001-of-00002.gguf' and"):
        read_path(str(tmp_path))


def test_gguf_padding_is_the_files_not_the_weights(tmp_path):
    tensors = [("blk.0.attn_norm.weight", F32, (7,)), ("rope_freqs.weight", F32, (5,))]
    data = gguf_bytes([("general.architecture", 8, "llama")], tensors)
    found = read_gguf(data, "pad.gguf", len(data))
    assert found.total_bytes == 48 and found.data_bytes == 64 and found.by_pool == {"norms": 28, "other": 20}


def test_gguf_alignment_and_byte_order(tmp_path):
    tensors = [("blk.0.attn_q.weight", Q8_0, (32, 3))]
    data = gguf_bytes([("general.alignment", 4, 64)], tensors, alignment=64)
    assert read_gguf(data, "a.gguf", len(data)).data_bytes == 128
    big = bytearray(data)
    struct.pack_into(">IQQ", big, 4, 3, 1, 1)     # a big-endian file's header: counts read the other way round
    with pytest.raises(FieldError):
        read_gguf(bytes(big))                   # its key's length is big-endian too: refused, named, not hung
    with pytest.raises(FieldError, match="version 1; this reader takes versions 2 and 3"):
        read_gguf(gguf_bytes([], [], version=1))
    assert read_gguf(gguf_bytes([], tensors, version=2)).total_bytes == 102


def test_a_long_gguf_header_is_read_in_growing_pieces(tmp_path):
    tokens = [("tokenizer.ggml.tokens", 9, (8, ["x" * 30] * 40_000))]     # ~1.5 MB of header
    path = write(tmp_path / "long.gguf", gguf_bytes(tokens, GGUF_TENSORS + [("big", F32, (4096, 256))]))
    asked = []

    def reader(file, size):
        asked.append(size)
        with open(file, "rb") as handle:
            return handle.read(size)

    found = checkpoint.read_file(path, reader)
    assert found.total_bytes == sum(GGUF_BYTES.values()) + 4096 * 256 * 4
    assert asked == [8, 1 << 20, 1 << 21] and found.header_bytes > 1 << 20


def test_gguf_refusals_name_the_tensor():
    with pytest.raises(FieldError, match="'blk.0.x' has 100 elements a row, not a whole number of Q4_K's 256"):
        read_gguf(gguf_bytes([], [("blk.0.x", Q4_K, (100, 2))]))
    with pytest.raises(FieldError, match="'t' has ggml type 4, which gguf 0.19.0 does not define"):
        read_gguf(b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + gguf_string("t") + struct.pack("<IQIQ", 1, 32, 4, 0))
    with pytest.raises(FieldError, match="'t' has 5 dimensions"):
        read_gguf(b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + gguf_string("t") + struct.pack("<I5Q", 5, 1, 1, 1, 1, 1))
    data = bytearray(gguf_bytes([], [("a", F32, (8,)), ("b", F32, (8,))]))
    at = data.index(gguf_string("b")) + len(gguf_string("b")) + 4 + 8 + 4
    struct.pack_into("<Q", data, at, 0)
    with pytest.raises(FieldError, match="tensor 'b' is at data offset 0, expected 32"):
        read_gguf(bytes(data))
    with pytest.raises(FieldError, match="tensor 'a' is listed twice"):
        read_gguf(gguf_bytes([], [("a", F32, (8,)), ("a", F32, (8,))]))


# --- pools by name ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,pool", [
    ("model.embed_tokens.weight", "embedding"), ("transformer.wte.weight", "embedding"),
    ("bert.embeddings.LayerNorm.weight", "embedding"), ("token_embd.weight", "embedding"),
    ("model.layers.3.self_attn.q_proj.weight", "attention"), ("transformer.h.0.attn.c_proj.weight", "attention"),
    ("model.layers.0.self_attn.q_norm.weight", "norms"), ("transformer.h.0.ln_1.weight", "norms"),
    ("model.layers.0.mixer.in_proj.weight", "attention"), ("blk.4.ssm_in.weight", "attention"),
    ("model.layers.0.mlp.down_proj.qweight", "mlp"), ("transformer.h.0.mlp.c_proj.weight", "mlp"),
    ("encoder.layer.0.output.dense.weight", "mlp"), ("encoder.layer.0.attention.output.dense.weight", "attention"),
    ("model.layers.1.mlp.experts.7.up_proj.weight_scale_inv", "experts"),
    ("model.layers.1.mlp.experts.gate_up_proj_blocks", "experts"), ("blk.1.ffn_down_exps.weight", "experts"),
    ("model.layers.1.mlp.shared_experts.up_proj.weight", "mlp"), ("blk.1.ffn_up_shexp.weight", "mlp"),
    ("model.layers.1.mlp.gate.weight", "mlp"), ("blk.1.ffn_gate_inp.weight", "mlp"),
    ("model.norm.weight", "head"), ("lm_head.weight", "head"), ("output.weight", "head"),
    ("output_norm.weight", "head"), ("transformer.ln_f.weight", "head"), ("score.weight", "head"),
    ("model.visual.blocks.0.attn.qkv.weight", "vision"), ("vision_tower.encoder.layers.0.mlp.fc1.weight", "vision"),
    ("multi_modal_projector.linear_1.weight", "vision"), ("v.blk.0.attn_q.weight", "vision"),
    ("mm.0.weight", "vision"), ("rope_freqs.weight", "other"), ("model.layers.0.weird.thing", "other"),
])
def test_pool_by_name(name, pool):
    assert pool_of(name) == pool


# --- the command line ------------------------------------------------------------------------------------

def test_command_line_prints_exact_bytes_and_gib(tmp_path, capsys):
    path = write(tmp_path / "model.safetensors", safetensors_bytes(llama()))
    assert cli.main([f"header={path}"]) == 0
    out, err = capsys.readouterr()
    assert f"Weights: {total(llama()):,} bytes" in out and "GiB (GiB = 2^30 bytes)" in out and not err
    assert f"{llama_pools()['embedding']:,}" in out and "BF16" in out
    assert cli.main([f"header={path}", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["total_bytes"] == total(llama()) and shown["by_pool"] == llama_pools()
    assert shown["source"] == "the checkpoint's headers: model.safetensors"


def test_command_line_reads_gguf_and_notes(tmp_path, capsys):
    path = write(tmp_path / "model.gguf", gguf_bytes(GGUF_METADATA, GGUF_TENSORS))
    assert cli.main(["--json", f"header={path}"]) == 0
    assert json.loads(capsys.readouterr().out)["total_bytes"] == sum(GGUF_BYTES.values())
    assert cli.main([f"header={path}"]) == 0
    assert "Architecture (GGUF metadata): architecture llama, block_count 1" in capsys.readouterr().out
    index, _ = shards(tmp_path, total_size=1)
    assert cli.main([f"header={index}"]) == 0
    assert "note: the index's metadata.total_size says 1 bytes" in capsys.readouterr().err


@pytest.mark.parametrize("words,message", [
    (["header=/nonexistent/\u202ex"], "error: header: no such file or folder: '/nonexistent/?x'"),
    (["header=a", "header=b"], "error: header: takes one PATH"),
    (["header=a", "model=gpt2"], "error: header: takes one PATH"),
])
def test_command_line_refusals(capsys, words, message):
    assert cli.main(words) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(message) and len(err.strip().splitlines()) == 1


def test_command_line_refuses_a_folder_with_no_checkpoint(tmp_path, capsys):
    os.mkfifo(tmp_path / "model.safetensors")          # never opened: it would wait for a writer
    assert cli.main([f"header={tmp_path}"]) == 2
    assert "has no model.safetensors.index.json, .safetensors or .gguf file" in capsys.readouterr().err
    assert cli.main([f"header={tmp_path / 'model.safetensors'}"]) == 2
    assert "model.safetensors' is not a regular file" in capsys.readouterr().err


# --- the formats' own writers (PyPI) ---------------------------------------------------------------------

TORCH_NAMES = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "F8_E5M2": "float8_e5m2", "F8_E4M3": "float8_e4m3fn",
               "F8_E8M0": "float8_e8m0fnu", "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz",
               "I16": "int16", "U16": "uint16", "F16": "float16", "BF16": "bfloat16", "I32": "int32",
               "U32": "uint32", "F32": "float32", "C64": "complex64", "F64": "float64", "I64": "int64",
               "U64": "uint64"}


def serialize_file(path, tensors):
    """The tensors (zeros) written by safetensors' own serializer."""
    safetensors = pytest.importorskip("safetensors", reason="the safetensors package is not installed")
    buffers, specs = [], {}
    for name, (dtype, shape) in tensors.items():
        size = nbytes(dtype, shape)
        buffers.append(ctypes.create_string_buffer(max(size, 1)))
        specs[name] = safetensors.TensorSpec(dtype=TORCH_NAMES[dtype], shape=list(shape),
                                             data_ptr=ctypes.addressof(buffers[-1]), data_len=size)
    safetensors.serialize_file(specs, str(path))
    return str(path)


@pytest.mark.parametrize("make,pools", [(llama, llama_pools), (fp8_moe, fp8_pools), (mxfp4, mxfp4_pools),
                                        (gptq, None)])
def test_files_written_by_safetensors_itself(tmp_path, make, pools):
    path = serialize_file(tmp_path / "model.safetensors", make())
    found = read_path(path)
    assert found.total_bytes == weights_in_safetensors(path) == total(make())
    assert pools is None or found.by_pool == pools()
    assert {t.name: (t.dtype, t.shape) for t in found.tensors} == make()


def test_safetensors_names_the_dtypes_as_we_do(tmp_path):
    tensors = {f"t.{dtype}": (dtype, (2, 4)) for dtype in TORCH_NAMES}
    found = read_path(serialize_file(tmp_path / "all.safetensors", tensors))
    assert found.by_dtype == {dtype: 8 * SAFETENSORS_BITS[dtype] // 8 for dtype in TORCH_NAMES}


@pytest.mark.parametrize("order", ["LITTLE", "BIG"])
def test_files_written_by_gguf_py(tmp_path, order):
    gguf = pytest.importorskip("gguf", reason="the gguf package (gguf-py) is not installed")
    np = pytest.importorskip("numpy")
    path = tmp_path / "model.gguf"
    writer = gguf.GGUFWriter(str(path), "llama", endianess=gguf.GGUFEndian[order])
    writer.add_block_count(1)
    writer.add_embedding_length(256)
    writer.add_token_list([f"t{i}" for i in range(100)])
    for name, kind, ne in GGUF_TENSORS:
        _, block, block_bytes = GGML_TYPES[kind]
        if block == 1:
            writer.add_tensor(name, np.zeros(ne[::-1], {F32: np.float32, F16: np.float16}[kind]))
        else:       # raw blocks: the writer takes the bytes a row and the ggml type
            rows = ne[::-1][:-1]
            writer.add_tensor(name, np.zeros((*rows, ne[0] // block * block_bytes), np.uint8),
                              raw_dtype=gguf.GGMLQuantizationType(kind))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    found = read_path(str(path))
    start = found.header_bytes + (-found.header_bytes % 32)
    assert found.total_bytes == os.path.getsize(path) - start == sum(GGUF_BYTES.values())
    assert {t.name: t.nbytes for t in found.tensors} == GGUF_BYTES
    assert {t.name: t.shape for t in found.tensors} == {name: ne for name, _, ne in GGUF_TENSORS}
    assert found.architecture == {"architecture": "llama", "block_count": 1, "embedding_length": 256,
                                  "vocab_size": 100}


def test_ggml_types_are_gguf_py_s():
    gguf = pytest.importorskip("gguf", reason="the gguf package (gguf-py) is not installed")
    theirs = {int(kind): (kind.name, *sizes) for kind, sizes in gguf.GGML_QUANT_SIZES.items()}
    assert GGML_TYPES == theirs
    assert gguf.__version__ if hasattr(gguf, "__version__") else True


# --- hostile headers -------------------------------------------------------------------------------------

def refused(read, data, match=None):
    """``read`` refuses ``data`` with a header message, quickly."""
    count_fuzz("checkpoint headers")
    started = time.perf_counter()
    with pytest.raises(FieldError) as caught:
        read(data)
    assert caught.value.key == "header" and time.perf_counter() - started < 5
    if match:
        assert match in caught.value.message, caught.value.message
    return caught.value.message


@pytest.mark.parametrize("data,match", [
    (b"", "a safetensors file starts with an 8-byte header length"),
    (struct.pack("<Q", 2**64 - 1), "over safetensors' limit of 100,000,000"),
    (struct.pack("<Q", 100_000_001) + b"{}", "over safetensors' limit"),
    (struct.pack("<Q", 50) + b"{}", "the bytes end at 10 inside the 50-byte JSON header"),
    (struct.pack("<Q", 4) + b"[1,]", "does not start with '{'"),
    (struct.pack("<Q", 6) + b"{\"a\":}", "is not JSON: Expecting value"),
    (struct.pack("<Q", 3) + b"{\xff}", "not UTF-8"),
    (struct.pack("<Q", 15) + b'{"a":NaN,"b":1}', "the JSON holds NaN"),
    (struct.pack("<Q", 13) + b'{"a":1,"a":2}', "the JSON names 'a' twice"),
    (header_only(entry("Q4", (1,))), "dtype 'Q4'; safetensors defines BOOL, F4"),
    (header_only(entry("F32", (-1,))), "shape entry is -1"),
    (header_only(entry("F32", (True,))), "shape entry is True"),
    (header_only(entry("F32", (2**64,))), "not a whole number from 0 to 2^63"),
    (header_only(entry("F32", (2**62, 2**62))), "hold 4 bytes, but shape [4611686018427387904, 4611686018427387904]"),
    (header_only(entry("F32", (1,), (0,))), "data_offsets is not [begin, end]"),
    (header_only({"a": {"dtype": "F32"}}), "needs dtype, shape and data_offsets"),
    (header_only({"__metadata__": {"a": 1}}), "__metadata__ is not a map of strings"),
])
def test_malformed_safetensors_headers(data, match):
    refused(read_safetensors, data, match)


def test_safetensors_offsets_checked_by_name():
    data = json.dumps({"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 10]}}).encode()
    refused(read_safetensors, struct.pack("<Q", len(data)) + data, "tensor 'w': data_offsets [0, 10] hold 10 bytes, "
            "but shape [2, 3] of BF16 takes 12")
    data = json.dumps({"w": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                       "x": {"dtype": "U8", "shape": [2], "data_offsets": [4, 6]}}).encode()
    refused(read_safetensors, struct.pack("<Q", len(data)) + data, "tensor 'x' starts at data byte 4, expected 2")


def test_deep_and_wide_json_is_refused_before_parsing(monkeypatch):
    deep = b'{"a":' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    refused(read_safetensors, struct.pack("<Q", len(deep)) + deep, "nested deeper than 16 levels")
    escaped = b'{"a\\\\":{"b\\"[[[[":' + b"[" * 10 + b"]" * 10 + b"}}"       # brackets in strings do not count
    assert "needs dtype, shape and data_offsets" in refused(read_safetensors, struct.pack("<Q", len(escaped)) + escaped)
    monkeypatch.setattr(checkpoint, "MAX_JSON_VALUES", 1000)
    wide = b'{"a":[' + b"0," * 2000 + b"0]}"
    refused(read_safetensors, struct.pack("<Q", len(wide)) + wide, "over 1,000 values")
    monkeypatch.setattr(checkpoint, "MAX_TENSORS", 10)
    refused(read_safetensors, safetensors_bytes(llama(layers=1)), "lists 12 tensors, over 10")


@pytest.mark.parametrize("data,match", [
    (b"GGU", "the bytes end at 3 inside the magic"), (b"GGML" + bytes(20), "not a GGUF file: it starts with 'GGML'"),
    (b"GGUF" + struct.pack("<IQQ", 3, 2**63, 0), "tensors, over 1,000,000"),
    (b"GGUF" + struct.pack("<IQQ", 3, 0, 2**64 - 1), "metadata keys, over 1,000,000"),
    (b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 2**64 - 1), "metadata key 0 is 18,446,744,073,709,551,615 bytes long"),
    (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gguf_string("k") + struct.pack("<IIQ", 9, 0, 2**40),
     "is an array of 1,099,511,627,776, over 16,777,216"),
    (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gguf_string("k") + struct.pack("<IIQ", 9, 10, 2**24),
     "the bytes end at 49 inside key 'k' (it needs 134,217,777)"),
    (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gguf_string("k") + struct.pack("<I", 13), "value type 13"),
    (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gguf_string("k") + struct.pack("<IIQ", 9, 9, 1) +
     struct.pack("<IQ", 9, 1) * 5, "nests arrays deeper than 2"),
    (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gguf_string("general.alignment") + struct.pack("<II", 4, 24),
     "general.alignment is 24, not a power of 2"),
    (gguf_bytes([("k", 4, 1), ("k", 4, 2)], []), "metadata key 1 'k' is empty or given twice"),
    (b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + struct.pack("<Q", 5000) + b"x" * 5000, "over 4,096"),
    (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gguf_string("k") + struct.pack("<IQ", 8, 2) + b"\xff\xfe",
     "key 'k' is not UTF-8"),
])
def test_malformed_gguf_headers(data, match):
    refused(read_gguf, data, match)


def test_a_truncated_file_is_named_on_the_command_line(tmp_path, capsys):
    data = gguf_bytes(GGUF_METADATA, GGUF_TENSORS)
    path = write(tmp_path / "cut.gguf", data[:300])
    assert cli.main([f"header={path}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: header: 'cut.gguf': the GGUF header runs where the file ends: the bytes end at 300")
    path = write(tmp_path / "cut2.gguf", data[:-40])
    assert cli.main([f"header={path}"]) == 2
    assert "but its tensors end at byte" in capsys.readouterr().err
    path = write(tmp_path / "cut.safetensors", safetensors_bytes(llama())[:100])
    assert cli.main([f"header={path}"]) == 2
    assert "shorter than its" in capsys.readouterr().err


VALID = [safetensors_bytes(llama(layers=1), {"format": "pt"}), safetensors_bytes(gptq()),
         gguf_bytes(GGUF_METADATA, GGUF_TENSORS)[:4000]]


def read_any(data):
    return read_gguf(data) if data[:4] == b"GGUF" else read_safetensors(data)


@settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(VALID))), st.data())
def test_fuzz_truncated_and_mutated_headers(which, data):
    """Cut anywhere, or bytes overwritten anywhere: a Checkpoint or a header error, never anything else."""
    raw = bytearray(VALID[which][:8 + 4000])
    if data.draw(st.booleans()):
        raw = raw[:data.draw(st.integers(0, len(raw)))]
    for _ in range(data.draw(st.integers(0, 4))):
        if raw:
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    count_fuzz("checkpoint headers")
    started = time.perf_counter()
    try:
        found = read_any(bytes(raw))
    except FieldError as error:
        assert error.key == "header" and error.message and "\n" not in error.message
    else:
        assert found.total_bytes >= 0 and sum(found.by_pool.values()) == found.total_bytes
    assert time.perf_counter() - started < 2


JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
                    | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
                    max_leaves=20)
ENTRY = st.fixed_dictionaries({"dtype": st.sampled_from([*SAFETENSORS_BITS, "X"]),
                               "shape": st.lists(st.integers(-1, 5), max_size=3),
                               "data_offsets": st.lists(st.integers(-1, 64), min_size=1, max_size=3)})


@settings(max_examples=300, deadline=2000)
@given(st.dictionaries(st.text(max_size=10), ENTRY | JSON, max_size=5), st.integers(0, 3))
def test_fuzz_header_json(header, spaces):
    """Any JSON object as a header, with data to match or not: a Checkpoint or a header error."""
    raw = json.dumps(header).encode() + b" " * spaces
    count_fuzz("checkpoint headers")
    try:
        found = read_safetensors(struct.pack("<Q", len(raw)) + raw)
    except FieldError as error:
        assert error.key == "header" and error.message
    else:
        assert found.total_bytes == sum(t.nbytes for t in found.tensors)


@settings(max_examples=200, deadline=2000)
@given(st.binary(max_size=200))
def test_fuzz_random_bytes(blob):
    count_fuzz("checkpoint headers")
    for data in (blob, b"GGUF" + blob, struct.pack("<Q", len(blob)) + blob):
        try:
            read_any(data)
        except FieldError as error:
            assert error.key == "header"
