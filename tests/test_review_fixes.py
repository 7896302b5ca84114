"""Findings of this round's review of the change (each a defect shown by a command), held by tests."""

from pycore import estimate
from pycore.inputs.schema import parse
from pycore.memory import parallel, training
from pycore.memory.setup import resolve


def test_the_embedding_gradient_is_split_as_the_embedding_is():
    # tp=8: the embedding is stored vocab x hidden / 8 a GPU (parallel._place), its gradient too; no pool negative
    setup = resolve(parse({"model": "llama-3.1-8b", "tp": "8", "pp": "4"}))
    pools = training.stage_estimate(setup, parallel.stages(setup.arch, setup.layout)[0])["pools"]
    grads = {p.key: p.bytes for p in pools if "grad" in p.key}
    assert grads["embedding_gradient"] == -(-128_256 * 4_096 // 8) * 2 and min(grads.values()) >= 0


def test_the_vision_tower_keeps_a_micro_batch_in_flight_each():
    # 1F1B's first stage holds pp micro-batches' activations: the tower's too (stage.in_flight)
    one = estimate({"model": "gemma-3-27b-it", "images": "1"}).components["vision_activations"]
    piped = estimate({"model": "gemma-3-27b-it", "images": "1", "pp": "4", "microbatches": "8"})
    assert piped.stages[0]["components"]["vision_activations"] == 4 * one


def test_a_checkpoints_bytes_are_the_weights_only_when_held_as_stored():
    # a bf16 checkpoint's bytes: the weights of a bf16 step, not of autocast's fp32 weights nor of NF4 storage
    given = {"model": "llama-3.1-8b", "weight_bytes": "16060522496"}
    assert estimate({**given, "precision": "bf16"}).components["weights"] == 16_060_522_496
    amp = estimate({**given, "precision": "amp-bf16"})
    assert amp.components["weights"] == 4 * 8_030_261_248
    assert any("weight_bytes (a checkpoint's headers) is not used" in w for w in amp.warnings)
    assert estimate({**given, "method": "qlora"}).components["weights"] < 16_060_522_496 / 2


def test_vllm_fits_each_gpu_by_its_own_share_of_memory():
    # vLLM pre-allocates gpu_util of the GPU it starts on: the list judges every GPU by its own estimate, so an L40S
    # row says what gpu=l40s says (it reused the chosen H100's pre-allocated total)
    import json

    from pycore.output import web
    query = "model=qwen3-next-80b-a3b&mode=infer&engine=vllm&tp=4&seq=32768"
    rows = {row["id"]: row for row in json.loads(web.run(query))["gpus"]}
    own = estimate({"model": "qwen3-next-80b-a3b", "mode": "infer", "engine": "vllm", "tp": "4", "seq": "32768",
                    "gpu": "l40s"})
    assert rows["l40s"]["headroom_bytes"] == rows["l40s"]["memory_bytes"] - own.total_bytes
    assert rows["l40s"]["fits"] and not rows["rtx-4090"]["fits"]


def test_name_names_an_imported_config_too():
    # docs/inputs.md: name is what the model is called in the results; it was ignored beside config=
    result = estimate({"config": "tests/configs/qwen2.5-0.5b.json", "name": "my-qwen"})
    assert result.model.name == "my-qwen" and result.params_total == 494_032_768


def test_a_gguf_files_metadata_sets_the_model_on_the_page():
    # issue 30: "the architecture read from the config or the GGUF metadata". tests/test_checkpoint.py's GGUF: llama,
    # block_count 1, embedding_length 256, feed_forward_length 512, 4 heads, 2 KV heads, a 100-token vocabulary
    import json
    import sys
    from pathlib import Path

    from pycore.output import web
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_checkpoint import GGUF_BYTES, GGUF_METADATA, GGUF_TENSORS, gguf_bytes
    data = gguf_bytes(GGUF_METADATA, GGUF_TENSORS)
    answer = json.loads(web.header_summary([("model-Q4_K_M.gguf", len(data), data)]))
    chosen = dict(answer["set"])
    assert (chosen["layers"], chosen["hidden"], chosen["ffn"], chosen["heads"], chosen["kv_heads"], chosen["vocab"]) == \
        ("1", "256", "512", "4", "2", "100")
    assert chosen["name"] == "model-Q4_K_M.gguf" and chosen["weight_bytes"] == str(sum(GGUF_BYTES.values()))
    assert "Model read from its GGUF metadata" in answer["message"]


def test_a_checkpoint_too_large_or_small_for_the_model_is_named():
    # Llama 3.2 1B: 1,235,814,400 parameters (presets/models.json); its bf16 checkpoint is 2 bytes a parameter, a
    # 70B one read by mistake ~141 GB (16 bits a parameter of 70.6B), 114 bits a parameter of the 1B
    def notes(weight_bytes):
        return [w for w in estimate({"model": "llama-3.2-1b", "mode": "infer", "weight_bytes": str(weight_bytes),
                                     "weight_files": "model.safetensors"}).warnings if "bits per parameter" in w]
    assert notes(2 * 1_235_814_400) == []
    assert notes(1_235_814_400 // 4) == []                 # 2 bits a parameter: a 2-bit GGUF quantization
    assert "was it read for another model?" in notes(141_107_412_992)[0]
    assert "(model.safetensors)" in notes(141_107_412_992)[0]
    assert notes(1_235_814_400 // 8)                       # 1 bit a parameter: below any quantization
