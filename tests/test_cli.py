"""The command line: python -m pycore."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pycore.output import web

ROOT = Path(__file__).resolve().parent.parent


def run(*args):
    return subprocess.run([sys.executable, "-m", "pycore", *args], cwd=ROOT, capture_output=True, text=True)


def test_json_output_has_the_contract_fields():
    done = run("--json", "model=llama-3.1-8b")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["params"]["total"] == 8_030_261_248
    for key in ("weights", "gradients", "optimizer", "activations"):
        assert isinstance(result["components"][key], int)
    # The breakdown records add up to the total (pycore.memory.pools: live pools at the peak + overhead).
    assert sum(row["bytes"] for row in result["breakdown"]) == result["total_bytes"]
    assert {"key", "label", "bytes", "formula", "substituted", "source"} <= set(result["breakdown"][0])
    assert result["total_bytes"] == result["peak_bytes"] + result["overhead_bytes"]
    assert {"id", "name", "memory_bytes", "fits"} <= set(result["gpus"][0])


def test_table_says_gib():
    done = run("model=gpt2", "batch=4", "seq=1024")
    assert done.returncode == 0 and "GiB" in done.stdout and "2^30" in done.stdout


@pytest.mark.parametrize("args,key", [(["batch=-2"], "batch"), (["precision=fp64"], "precision"),
                                      (["kv_heads=3"], "kv_heads"), (["colour=red"], "colour"),
                                      (["batch"], "batch"), (["seq=1", "seq=2"], "seq")])
def test_bad_input_exits_2_with_one_line_naming_the_key(args, key):
    done = run(*args)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {key}")


def test_csv_is_the_pages_csv():
    args = ["model=qwen2.5-0.5b", "batch=4", "precision=bf16", "recompute=full"]
    done = run("--csv", *args)
    assert done.returncode == 0 and done.stdout == web.csv("&".join(args))


def test_config_json_import(tmp_path):
    # Llama 3.2 1B's config.json fields (huggingface.co/meta-llama/Llama-3.2-1B).
    config = {"model_type": "llama", "num_hidden_layers": 16, "hidden_size": 2048, "num_attention_heads": 32,
              "num_key_value_heads": 8, "head_dim": 64, "intermediate_size": 8192, "vocab_size": 128256,
              "tie_word_embeddings": True}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    done = run("--json", f"config={path}")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["params"]["total"] == 1_235_814_400


def test_partial_config_names_missing_fields(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    done = run(f"config={path}")
    assert done.returncode == 2 and "num_hidden_layers" in done.stderr and "vocab_size" in done.stderr


def test_models_and_gpus_listings():
    models, gpus = run("models"), run("gpus")
    assert "llama-3.1-8b" in models.stdout and "huggingface.co" in models.stdout
    assert "h100-sxm-80gb" in gpus.stdout and "GiB" in gpus.stdout


def test_what_fits_on_my_gpus():
    # Issue 13's example: which presets serve 8192-token prompts on two RTX 4090s.
    done = run("fits", "--json", "gpu=rtx-4090", "gpus=2", "mode=infer", "seq=8192")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    by_id = {row["id"]: row for row in rows}
    assert by_id["llama-3.2-1b"]["status"] == "fits" and by_id["llama-3.1-405b"]["status"] == "no"
    assert by_id["llama-3.1-8b"]["layout"] == {"tp": 2}
    headrooms = [row["headroom_bytes"] for row in rows if row["headroom_bytes"] is not None]
    assert headrooms == sorted(headrooms, reverse=True)
    # 70B in bf16 is 70,553,706,496 × 2 B = 141 GB of weights (validation/param_counts.json): split over two
    # cards each holds at least half, 70.6 GB, far more than an RTX 4090's 24 GB, whatever the layout.
    assert by_id["llama-3.1-70b"]["params"] == 70_553_706_496
    assert by_id["llama-3.1-70b"]["total_bytes"] >= 70_553_706_496 * 2 // 2


# Quiet output (issue 28): the chosen GPU, the smallest GPU that fits and the largest that does not.
def gpu_rows(out):
    return [line for line in out.splitlines() if " GiB usable " in line]


def table_of(capsys, *words):
    from pycore.output import cli
    assert cli.main(list(words)) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("words", [["model=llama-3.1-8b"], ["model=gpt2", "seq=1024", "gpu=rtx-4090"],
                                   ["model=llama-3.1-405b"], ["model=llama-3.1-70b", "mode=infer", "gpu=a10g"]])
def test_the_table_lists_three_gpus_by_default_and_every_one_with_gpus_all(capsys, words):
    from pycore import estimate
    from pycore.model.catalog import gpus
    total = estimate(dict(word.split("=") for word in words)).total_bytes
    catalog = gpus()
    fitting = [g for g in catalog.values() if total <= g["usable_bytes"]]
    short = [g for g in catalog.values() if total > g["usable_bytes"]]
    chosen = catalog[dict(word.split("=") for word in words).get("gpu", "h100-sxm-80gb")]
    rows = gpu_rows(table_of(capsys, *words))
    assert rows[0].startswith(chosen["name"]) and "(chosen" in rows[0]
    expected = {chosen["name"]}
    if fitting:
        smallest = min(g["usable_bytes"] for g in fitting)
        line = next(row for row in rows if "smallest that fits" in row)
        assert f"{smallest / 2**30:9,.2f} GiB usable" in line and " no " not in line
        expected.add(line[:38].strip())
    if short:
        largest = max(g["usable_bytes"] for g in short)
        line = next(row for row in rows if "largest that does not fit" in row)
        assert f"{largest / 2**30:9,.2f} GiB usable" in line and "     no  headroom" in line
        expected.add(line[:38].strip())
    assert ("smallest that fits" in "".join(rows)) == bool(fitting)
    assert ("largest that does not fit" in "".join(rows)) == bool(short)
    assert {row[:38].strip() for row in rows} == expected and len(rows) == len(expected) <= 3
    everything = table_of(capsys, "--gpus", "all", *words)
    assert len(gpu_rows(everything)) == len(catalog) and "--gpus all lists" not in everything
    assert f"{len(catalog) - len(rows)} more GPUs: --gpus all lists every one." in table_of(capsys, *words)
    assert gpu_rows(table_of(capsys, "--gpus=all", *words)) == gpu_rows(everything)


@pytest.mark.parametrize("words", [["--gpus"], ["--gpus", "3"], ["--gpus=some"]])
def test_gpus_accepts_all_only(words):
    done = run(*words)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error: --gpus: got") and "accepts all" in done.stderr
