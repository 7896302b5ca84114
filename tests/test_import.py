"""config.json import: exact counts for every supported family, the same architecture expressed in the schema's
keys, and one plain message for every malformed input.

Every expected count comes from validation/config_counts.json: sum(p.numel()) of the model that transformers 5.23
builds from the same file with AutoModelForCausalLM.from_config on the meta device (validation/count_configs.py).
The files in tests/configs/ are the models' published config.json (huggingface.co/<org>/<model>, named in each
preset's 'source' and in tests/configs/README.md); tests/configs/variants/synthetic-*.json are small configs that
switch on the options no published file in the set uses.
"""

import json
from pathlib import Path

import pytest

from pycore import estimate
from pycore.inputs.schema import InputError
from pycore.model import catalog
from pycore.model.architecture import count_parameters
from pycore.model.config_import import import_config
from pycore.model.hf_config import MAX_BYTES, architecture_from_dict, architecture_from_file

ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = ROOT / "tests" / "configs"
_COUNTS = json.loads((ROOT / "validation" / "config_counts.json").read_text())
# pycore counts every vision tower these files hold (Qwen2.5-VL's, Qwen3.5's, Llama 4's, Gemma 3's SigLIP and LFM2-VL's
# SigLIP2: pycore/model/vision.py): the whole model's count
RECORDED = {name: n + _COUNTS["vision_counts"].get(name, 0) for name, n in _COUNTS["counts"].items()}
ALL_CONFIGS = sorted(str(p.relative_to(CONFIG_DIR)) for p in CONFIG_DIR.rglob("*.json"))
PRESET_CONFIGS = sorted(p.stem for p in CONFIG_DIR.glob("*.json"))
NEW_FAMILIES = {"gpt_neox": "pythia-160m", "gpt_bigcode": "starcoder", "falcon": "falcon-7b", "phi": "phi-2",
                "starcoder2": "starcoder2-3b", "qwen2_moe": "qwen1.5-moe-a2.7b", "deepseek_v2": "deepseek-v2-lite",
                "gpt_oss": "gpt-oss-20b", "granite": "granite-3.1-2b-base", "cohere": "c4ai-command-r-v01"}


def read(name):
    return (CONFIG_DIR / name).read_text()


def test_every_config_file_was_counted_by_transformers():
    assert set(RECORDED) == set(ALL_CONFIGS)


@pytest.mark.parametrize("name", ALL_CONFIGS)
def test_count_equals_transformers_built_from_the_same_file(name):
    # validation/config_counts.json: AutoModelForCausalLM.from_config(<this file>) on the meta device.
    assert count_parameters(architecture_from_dict(json.loads(read(name)))).total == RECORDED[name]


@pytest.mark.parametrize("model_type,preset", sorted(NEW_FAMILIES.items()))
def test_each_new_family_has_a_preset_built_from_its_published_config(model_type, preset):
    assert json.loads(read(f"{preset}.json"))["model_type"] == model_type
    assert catalog.models()[preset]["params"] == RECORDED[f"{preset}.json"]


@pytest.mark.parametrize("stem", PRESET_CONFIGS)
def test_published_config_imports_to_the_exact_count(stem):
    answer = import_config(read(f"{stem}.json"))
    preset = catalog.preset_id(stem)                # gemma-3-27b-it.json: the gemma-3-27b-pt preset's alias
    assert answer["params"] == RECORDED[f"{stem}.json"] == catalog.models()[preset]["params"]
    # the only notes: what is in the file but not counted (a vision encoder, multi-token-prediction layers)
    config = json.loads(read(f"{stem}.json"))
    counted = catalog.architecture(preset).vision_layers > 0          # pycore/model/vision.py counts this tower
    text = config.get("text_config", config)
    vision = "vision_config" in config and not counted
    # Qwen3-Next's file names no MTP layer, but its checkpoint ships one (vLLM 0.11 qwen3_next_mtp.py's default)
    mtp = bool(text.get("num_nextn_predict_layers") or text.get("mtp_num_hidden_layers")) or \
        text.get("model_type") == "qwen3_next"
    assert len(answer["warnings"]) == vision + mtp
    assert vision == any("vision encoder (vision_config)" in w for w in answer["warnings"])
    assert mtp == any("multi-token-prediction" in w for w in answer["warnings"])
    # The query the page puts in the URL describes a model of the same size.
    assert estimate({"seq": "512", **dict(answer["query"])}).params_total == answer["params"]


@pytest.mark.parametrize("name,preset,overrides", [
    # Phi-1.5 and Pythia-1B: the family's preset with the sizes changed.
    ("variants/phi-1_5.json", "phi-2", [["layers", "24"], ["hidden", "2048"], ["ffn", "8192"]]),
    ("variants/pythia-1b.json", "pythia-160m",
     [["layers", "16"], ["hidden", "2048"], ["heads", "8"], ["kv_heads", "8"], ["ffn", "8192"]]),
])
def test_a_family_member_is_its_preset_plus_overrides(name, preset, overrides):
    answer = import_config(read(name))
    assert answer["query"][:-1] == [["model", preset]] + overrides
    assert answer["query"][-1][0] == "name"         # the config's own name travels with the link
    assert answer["params"] == RECORDED[name]
    assert estimate({"seq": "512", **dict(answer["query"])}).params_total == RECORDED[name]


@pytest.mark.parametrize("name,feature", [
    ("variants/falcon-rw-1b.json", "q/k/v biases"),                 # Falcon-RW: biased, sequential blocks
    ("variants/synthetic-phi-qk-layernorm.json", "query/key norms"),
    ("variants/synthetic-starcoder2-no-bias.json", "MLP biases"),
])
def test_an_inexpressible_feature_is_named_and_the_link_carries_the_config(name, feature):
    answer = import_config(read(name))
    assert feature in answer["message"] and f"{RECORDED[name]:,}" in answer["message"]
    query = dict(answer["query"])
    assert json.loads(query["config"]) == json.loads(read(name))      # the config itself, compact
    assert estimate({"seq": "512", **query}).params_total == RECORDED[name]


@pytest.mark.parametrize("name", sorted(str(p.relative_to(CONFIG_DIR)) for p in (CONFIG_DIR / "families").glob("*.json")))
def test_every_2025_2026_family_imports_with_its_exact_count(name):
    # issue 29: a family with no preset (Apertus, Falcon-H1, Granite 4.0 hybrid, Jamba, Mamba-2) or none that overrides
    # express (GLM-4.5's dense-first layers, LFM2's layer pattern, Nemotron-H's) imported on the page, its count the
    # count transformers gives on the meta device (validation/config_counts.json)
    answer = import_config(read(name))
    assert "error" not in answer
    assert answer["params"] == RECORDED[name]
    assert estimate({"seq": "512", **dict(answer["query"])}).params_total == RECORDED[name]


def test_unknown_model_type_with_standard_keys_is_read_as_llama_with_a_warning():
    config = json.loads(read("llama-3.1-8b.json"))
    config["model_type"] = "my_new_decoder"
    answer = import_config(json.dumps(config))
    assert "my_new_decoder" in answer["warnings"][0] and "Llama-style" in answer["warnings"][0]
    # The fixture keeps transformers' LlamaConfig default of 2048 positions, which the import carries.
    assert answer["query"] == [["model", "llama-3.1-8b"], ["max_positions", "2048"], ["name", "imported config"]]
    # validation/config_counts.json: LlamaForCausalLM from this file has 8,030,261,248 parameters.
    assert answer["params"] == RECORDED["llama-3.1-8b.json"] == 8_030_261_248


def test_unknown_model_type_without_standard_keys_is_refused():
    error = import_config('{"model_type": "mamba", "hidden_size": 768}')["error"]
    assert "'mamba' is not supported yet" in error
    assert "num_hidden_layers, num_attention_heads, intermediate_size, vocab_size" in error


def test_multimodal_wrapper_imports_its_text_decoder():
    text = json.loads(read("gemma-3-1b-pt.json"))
    wrapper = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"], "text_config": text}
    assert import_config(json.dumps(wrapper))["params"] == RECORDED["gemma-3-1b-pt.json"]


def _llama(**changes):
    config = json.loads(read("llama-3.1-8b.json"))
    config.update(changes)
    return json.dumps(config)


@pytest.mark.parametrize("text,message", [
    ("{not json", "config.json is not valid JSON: line 1 column 2 (expected a key in double quotes)"),
    ("", "config.json is empty"),
    ("nonsense", "config.json is not valid JSON: line 1 column 1 (expected a value"),
    ('{"a": 1,}', "config.json is not valid JSON: line 1 column 9"),
    ('{"a": 1} {"b": 2}', "unexpected text after the end"),
    (_llama(num_hidden_layers=float("nan")), "num_hidden_layers: must be a whole number from 1 to 10,000, got NaN"),
    (_llama(num_hidden_layers=float("inf")), "num_hidden_layers: must be a whole number from 1 to 10,000, got a number too large"),
    ("[1, 2]", "config.json must be a JSON object ({...}), got an array"),
    ('"llama"', "got a string"),
    ("[" * 10_000 + "]" * 10_000, "nests brackets more than 64 levels deep"),
    ('{"a": ' + "[" * 100_000, "nests brackets more than 64 levels deep"),
    ('{"model_type": ["llama"]}', 'model_type: must be a string such as "llama", got a list'),
    ('{"model_type": {"nested": {"garbage": [1, {}]}}}', "model_type: must be a string"),
    (_llama(num_attention_heads=0), "num_attention_heads: must be a whole number from 1 to 100,000, got 0"),
    (_llama(num_attention_heads="32"), "num_attention_heads: must be a whole number from 1 to 100,000, got the text '32'"),
    (_llama(num_attention_heads=True), "num_attention_heads: must be a whole number from 1 to 100,000, got true"),
    (_llama(num_hidden_layers=-3), "num_hidden_layers: must be a whole number from 1 to 10,000, got -3"),
    (_llama(num_hidden_layers=10**9), "num_hidden_layers: must be a whole number from 1 to 10,000, got 1,000,000,000"),
    (_llama(num_hidden_layers=2.5), "num_hidden_layers: must be a whole number from 1 to 10,000, got 2.5"),
    (_llama(num_hidden_layers=[32]), "num_hidden_layers: must be a whole number from 1 to 10,000, got a list"),
    (_llama().replace('"num_hidden_layers": 32', '"num_hidden_layers": 1e400'),
     "num_hidden_layers: must be a whole number from 1 to 10,000, got a number too large to represent"),
    (_llama().replace('"num_hidden_layers": 32', '"num_hidden_layers": ' + "9" * 5000),
     "config.json has a number with more than 40 digits"),
    (_llama(hidden_size=10**7), "hidden_size: must be a whole number from 1 to 1,000,000"),
    (_llama(vocab_size=10**8), "vocab_size: must be a whole number from 1 to 10,000,000"),
    (_llama(num_local_experts=10**6), "num_local_experts: must be a whole number from 0 to 100,000"),
    (_llama(num_key_value_heads=5), "num_key_value_heads: must divide num_attention_heads (32), got 5"),
    (_llama(tie_word_embeddings="yes"), "tie_word_embeddings: must be true or false, got the text 'yes'"),
    (_llama(attention_bias=1), "attention_bias: must be true or false, got 1"),
    (_llama(attention_dropout=3), "attention_dropout: must be a number from 0 to 1, got 3"),
    (_llama(num_hidden_layers=None), "missing num_hidden_layers"),
    (json.dumps({"model_type": "qwen2_moe", **{k: v for k, v in json.loads(read("qwen1.5-moe-a2.7b.json")).items()
                                             if k != "model_type"}, "mlp_only_layers": "all"}),
     "mlp_only_layers: must be a list of layer numbers from 0 to 23"),
], ids=lambda value: value[:40])
def test_bad_configs_get_one_plain_message(text, message):
    answer = import_config(text)
    assert set(answer) == {"error"}
    assert message in answer["error"]
    assert "Expecting" not in answer["error"] and "Traceback" not in answer["error"]


def test_a_file_over_the_size_limit_is_refused_naming_the_limit():
    text = '{"model_type": "llama", "padding": "' + "x" * MAX_BYTES + '"}'
    assert "the limit is 2,000,000 (2 MB)" in import_config(text)["error"]


def test_config_strings_are_shown_as_text_only():
    error = import_config('{"model_type": "<script>alert(1)</script>' + "x" * 200 + '"}')["error"]
    assert len(error) < 700         # most of it is the list of the 40 supported families
    assert "'<script>alert(1)</script>xxxx" in error        # quoted, cut to 40 characters; the page shows text


def test_architecture_from_file_keeps_working_for_the_cli(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(read("pythia-160m.json"))
    assert count_parameters(architecture_from_file(str(path))).total == RECORDED["pythia-160m.json"]
    path.write_text("[" * 5000)
    with pytest.raises(InputError, match="levels deep"):
        architecture_from_file(str(path))
    with pytest.raises(InputError, match="cannot read"):
        architecture_from_file(str(tmp_path / "missing.json"))


def test_a_memory_relevant_field_without_an_input_key_is_named_in_a_warning():
    # Phi-1.5's config.json sets resid_pdrop 0.0; the phi-2 preset it is expressed against has 0.1 (phi-2.json).
    answer = import_config(read("variants/phi-1_5.json"))
    assert answer["warnings"] == ["The config's dropout (dropout 0.0) has no input key: the estimate uses "
                                  "phi-2's (0.1)."]


def test_a_link_carries_the_config_text_never_a_path():
    # pycore/output/web.py _pairs: config= from a link is read only as a config.json's own text
    from urllib.parse import urlencode

    from pycore.output import web
    text = json.dumps(json.loads(read("families/mamba2.json")), separators=(",", ":"))
    payload = json.loads(web.run(urlencode({"config": text, "seq": "512"})))
    assert payload["errors"] == {} and f"{RECORDED['families/mamba2.json']:,} parameters" in payload["summary"]["model"]
    refused = json.loads(web.run(urlencode({"config": str(CONFIG_DIR / "families" / "mamba2.json")})))
    assert "not a path" in refused["errors"]["config"]
    too_long = json.loads(web.run(urlencode({"config": "{" + " " * 20_001 + "}"})))
    assert "20,000 characters" in too_long["errors"]["config"]


def test_the_command_line_reads_a_config_text_as_a_file():
    text = read("families/jamba.json")
    assert estimate({"config": text, "seq": "512"}).params_total == RECORDED["families/jamba.json"]


def test_a_carried_config_in_links_answers_and_exports_as_its_own_model():
    # the review of the config= links: a baseline naming another model leaves the config and its name; a config the
    # link cannot read leaves its name too; vllm serve names a hub id or says to give one; no path from a link
    from urllib.parse import urlencode

    from pycore.output import web
    text = json.dumps(json.loads(read("families/mamba2.json")), separators=(",", ":"))
    mamba = RECORDED["families/mamba2.json"]
    payload = json.loads(web.answers(urlencode({"config": text, "name": "imported config", "seq": "512",
                                                "base.model": "llama-3.1-8b"})))
    weights = next(row for row in payload["comparison"]["rows"] if row["key"] == "weights")
    assert weights["baseline"] == f"{8_030_261_248 * 4 / 2**30:.2f} GiB"      # llama-3.1-8b's fp32 weights
    bad = json.loads(web.run(urlencode({"config": '{"model_type": "llama"}', "name": "imported config"})))
    assert "config" in bad["errors"] and "imported config" not in bad["summary"]["model"]
    served = json.loads(web.launch(urlencode({"config": text, "name": "imported config", "mode": "infer",
                                              "engine": "vllm"})))
    assert any("<model path or hub id>" in b["text"] for b in served["blocks"] if b["kind"] == "vllm")
    hub = json.loads(web.launch(urlencode({"config": text, "name": "mistralai/Mamba-Codestral-7B-v0.1", "mode": "infer",
                                           "engine": "vllm"})))
    assert any("vllm serve mistralai/Mamba-Codestral-7B-v0.1" in b["text"] for b in hub["blocks"] if b["kind"] == "vllm")
    for key in ("reward_model", "value_model", "teacher", "draft_model"):
        refused = json.loads(web.run(urlencode({"method": "ppo", key: "/etc/x.json"})))
        assert "never a file" in refused["errors"][key]
    assert f"{mamba:,}" in json.loads(web.run(urlencode({"config": text})))["summary"]["model"]


def test_an_exported_vllm_line_with_images_reads_back_to_the_same_context():
    # export.vllm: --max-model-len is the estimate's context, the images' tokens included, and --limit-mm-per-prompt
    # only for a model whose images add tokens; read back, images=0 so they are not counted twice (the review)
    from pycore.inputs.schema import parse as parse_values
    from pycore.output import export
    inputs = {"model": "qwen2.5-vl-7b-instruct", "mode": "infer", "engine": "vllm", "images": "2", "seq": "1024",
              "new_tokens": "256"}
    result = estimate(inputs)
    line = export.vllm(parse_values(inputs), result)
    assert f"--max-model-len {result.vllm['context']}" in line and "--limit-mm-per-prompt" in line
    again = estimate(export.read(line))
    assert again.vllm["context"] == result.vllm["context"] and again.vllm["kv_cache_tokens"] == result.vllm["kv_cache_tokens"]
    assert "--limit-mm-per-prompt" not in export.unread(line)
    text_only = {"model": "llama-3.1-8b", "mode": "infer", "engine": "vllm", "images": "2"}
    assert "--limit-mm-per-prompt" not in export.vllm(parse_values(text_only), estimate(text_only))


def test_a_config_serves_in_the_dtype_it_names_and_says_when_it_names_none(tmp_path):
    # transformers 5 loads a checkpoint in its config's dtype (from_pretrained's dtype="auto"), the wrapper's
    # torch_dtype first: llava-hf/llava-v1.6-mistral-7b-hf's "float16" (its text_config says "bfloat16")
    served = estimate({"config": str(CONFIG_DIR / "llava-v1.6-mistral-7b-hf.json"), "mode": "infer"})
    assert served.setup.weight_dtype == "fp16" and not any("names no dtype" in w for w in served.warnings)
    config = json.loads(read("llava-v1.6-mistral-7b-hf.json"))
    config.pop("torch_dtype")
    config["text_config"].pop("torch_dtype")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    unnamed = estimate({"config": str(path), "mode": "infer"})
    assert unnamed.setup.weight_dtype == "bf16"
    assert any("names no dtype (torch_dtype): its weights are served as bf16" in w for w in unnamed.warnings)
    assert not any("names no dtype" in w for w in estimate({"config": str(path), "mode": "infer",
                                                            "precision": "fp16"}).warnings)
