"""Imports named as what they are (issue #27, part 2): a config.json is named by its own name
(``_name_or_path``, else ``architectures[0]``, else "imported config"), with the closest preset said
separately, and an unknown model_type read Llama-style says so on the command line, in --json and on the page."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pycore.model.config_import import import_config
from pycore.model.hf_config import config_name

ROOT = Path(__file__).resolve().parent.parent
QWEN = json.loads((ROOT / "tests" / "configs" / "qwen2.5-0.5b.json").read_text())


@pytest.fixture
def mystery(tmp_path):
    def write(**fields):
        config = {**{k: v for k, v in QWEN.items() if k not in ("_name_or_path", "architectures")},
                  "model_type": "mystery", **fields}
        path = tmp_path / "config.json"
        path.write_text(json.dumps(config))
        return str(path)
    return write


def run(*words):
    return subprocess.run([sys.executable, "-m", "pycore", *words], cwd=ROOT, capture_output=True, text=True,
                          check=True)


def test_the_config_names_itself():
    assert config_name({"_name_or_path": "acme/mystery-1b", "architectures": ["X"]}) == "acme/mystery-1b"
    assert config_name({"architectures": ["MysteryForCausalLM"]}) == "MysteryForCausalLM"
    assert config_name({"model_type": "mystery"}) == "imported config"


def test_the_command_line_names_it_and_warns(mystery):
    path = mystery(_name_or_path="acme/mystery-1b")
    done = run(f"config={path}")
    assert "Model: acme/mystery-1b" in done.stdout and "config.json" not in done.stdout.split("\n")[0]
    assert "Llama-style" in done.stdout + done.stderr
    assert "Closest preset: llama-3.1-8b" in done.stderr


def test_json_carries_the_name_and_the_warning(mystery):
    shown = json.loads(run(f"config={mystery(architectures=['MysteryForCausalLM'])}", "--json").stdout)
    assert shown["model"]["name"] == "MysteryForCausalLM" and shown["model"]["source"] == "config.json"
    assert any("Llama-style" in w for w in shown["warnings"])
    assert any("Closest preset: llama-3.1-8b" in w for w in shown["warnings"])
    unnamed = json.loads(run(f"config={mystery()}", "--json").stdout)
    assert unnamed["model"]["name"] == "imported config"


def test_the_pages_import_names_it_and_warns(mystery):
    answer = import_config(Path(mystery(_name_or_path="acme/mystery-1b")).read_text())
    assert answer["message"].startswith("Imported acme/mystery-1b")
    assert "Closest preset: llama-3.1-8b" in answer["message"]
    assert any("Llama-style" in w for w in answer["warnings"])
    # site/import.js shows the warnings beside the message.
    assert "answer.warnings" in (ROOT / "site" / "import.js").read_text()


def test_the_pages_link_names_it_and_says_the_closest_preset_separately():
    # Issue 27: the page showed an imported unknown model_type as "llama-3.1-8b: 1,100,048,384 parameters".
    from urllib.parse import urlencode

    from pycore.model.config_import import import_config
    from pycore.output import web
    config = {"model_type": "my_new_decoder", "_name_or_path": "acme/tiny-decoder", "hidden_size": 2048,
              "intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32,
              "num_key_value_heads": 4, "vocab_size": 32000, "max_position_embeddings": 2048}
    answer = import_config(json.dumps(config))
    assert ["name", "acme/tiny-decoder"] in answer["query"]
    payload = json.loads(web.run(urlencode([tuple(pair) for pair in answer["query"]])))
    line = payload["summary"]["model"]
    assert line.startswith("acme/tiny-decoder: ") and line.endswith("Closest preset: llama-3.1-8b.")
    assert payload["result"]["params"]["total"] == answer["params"]


def test_overrides_without_a_name_are_not_called_the_preset():
    from pycore import estimate
    result = estimate({"model": "llama-3.1-8b", "layers": "16"})
    assert result.model.name == "llama-3.1-8b with overrides (layers)" and result.model.preset == "llama-3.1-8b"
    plain = estimate({"model": "llama-3.1-8b"})
    assert plain.model.name == "llama-3.1-8b" and plain.model.preset == ""
