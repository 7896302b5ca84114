"""README.md as a newcomer reads it: every command in it runs, every output line it shows is printed.

Each `python -m pycore ...` line of its ```sh blocks (and of its inline code) runs and exits 0; where a
```text block follows a command block, each of its lines (spaces collapsed) is a line of the output of
that block's last command. A ```python block runs the same way. The two set-up commands are not run
here (they are what CI runs): they are checked to be the ones build.py and tests/run.sh provide. The
accuracy table is checked against docs/validation.md, each link against the files, the length against
issue 28's limit.
"""

import re
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
VALIDATION = (ROOT / "docs" / "validation.md").read_text(encoding="utf-8")
SETUP = ["python3 build.py serve", "bash tests/run.sh"]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)


def blocks(text):
    """[(language, body, text block right after it or None)] for each fenced block but the output ones."""
    found = [(m.group(1), m.group(2), m.start(), m.end()) for m in FENCE.finditer(text)]
    result = []
    for i, (language, body, _, end) in enumerate(found):
        if language == "text":
            continue
        after = found[i + 1] if i + 1 < len(found) else None
        shown = after[1] if after and after[0] == "text" and not text[end:after[2]].strip() else None
        result.append((language, body, shown))
    return result


def is_pycore(words):
    return words[:3] in (["python", "-m", "pycore"], ["python3", "-m", "pycore"])


def commands():
    """(command words, output lines it must print) for every pycore command in the README."""
    found = []
    for language, body, shown in blocks(README):
        if language != "sh":
            continue
        lines = [shlex.split(line, comments=True) for line in body.splitlines()]
        lines = [words for words in lines if words]
        for n, words in enumerate(lines):
            if is_pycore(words):
                found.append((words, shown if n == len(lines) - 1 else None))
    for span in re.findall(r"`(python3? -m pycore[^`]*)`", README):
        found.append((shlex.split(span), None))
    return found


def collapsed(text):
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def assert_shown(output, shown, what):
    printed = collapsed(output)
    for line in collapsed(shown or ""):
        assert line in printed, f"{what}: the README shows {line!r}, not in its output:\n{output}"


def test_every_shell_line_is_a_pycore_command_or_a_setup_command():
    for language, body, _ in blocks(README):
        assert language in ("sh", "python"), f"a ```{language} block no test runs"
        if language != "sh":
            continue
        for line in body.splitlines():
            words = shlex.split(line, comments=True)
            assert not words or is_pycore(words) or " ".join(words) in SETUP, f"no test runs {line!r}"
            assert not set("|;&<>") & set(" ".join(words)), f"{line!r}: one command a line, no shell syntax"


@pytest.mark.parametrize("words,shown", commands(), ids=[" ".join(words) for words, _ in commands()])
def test_readme_command_runs_and_prints_what_the_readme_shows(words, shown):
    done = subprocess.run([sys.executable, *words[1:]], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{' '.join(words)} exited {done.returncode}:\n{done.stderr}"
    assert_shown(done.stdout, shown, " ".join(words))


def test_readme_python_runs_and_prints_what_the_readme_shows():
    snippets = [(body, shown) for language, body, shown in blocks(README) if language == "python"]
    assert snippets, "the README shows the Python API"
    for body, shown in snippets:
        done = subprocess.run([sys.executable, "-c", body], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert_shown(done.stdout, shown, "the README's Python")


def test_readme_starts_with_what_it_answers_and_the_two_setup_commands():
    lines = README.splitlines()
    assert len(lines) < 150, f"README.md has {len(lines)} lines; issue 28 asks for under 150"
    language, body, _ = blocks(README)[0]
    assert language == "sh" and [" ".join(shlex.split(line, comments=True)) for line in body.splitlines()] == SETUP
    assert README.index(body) < README.index("\n## "), "the set-up commands come before the first section"
    assert re.findall(r"^## .*", README, re.M)[0] == "## What it answers"


def test_the_setup_commands_are_the_ones_the_project_provides():
    # python3 build.py serve: build.py's serve mode, on the port the README names
    build = (ROOT / "build.py").read_text(encoding="utf-8")
    assert 'argv[:1] == ["serve"]' in build and "else 8000)" in build
    assert "http://127.0.0.1:8000" in README
    assert "`pip install .`" not in README or "pip wheel --no-deps ." in build   # the wheel build.py makes
    # bash tests/run.sh: what CI runs, on a clean clone and before every Pages deploy
    assert (ROOT / "tests" / "run.sh").is_file()
    assert "bash tests/run.sh" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "bash tests/run.sh" in (ROOT / ".github" / "workflows" / "pages.yml").read_text(encoding="utf-8")
    run_sh = (ROOT / "tests" / "run.sh").read_text(encoding="utf-8")
    for step in ("apt-get install", "chromium", "requirements.txt", "build.py", "pytest"):
        assert step in run_sh, f"tests/run.sh no longer does what the README says ({step})"


def test_links_and_pictures_point_at_files():
    for name in ("README.md", "docs/speed.md"):
        text = (ROOT / name).read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
            if "://" not in target:
                assert (ROOT / name).parent.joinpath(target).exists(), f"{name} links to {target}, which is missing"


def _sections():
    """docs/validation.md as {section title: (header cells, rows of cells)} for its tables with an error column."""
    found = {}
    for part in re.split(r"^## ", VALIDATION, flags=re.M):
        rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in part.splitlines()
                if line.startswith("|")]
        if rows and "error" in rows[0]:
            found[part.splitlines()[0].lstrip("# ")] = (rows[0], rows[2:])
    return found


def _serving(head, row):
    return row[head.index("peak phase")] in ("prefill", "decode")


KINDS = {   # the README's row -> the section of docs/validation.md and which of its rows
    "on a GPU: training, accumulation, LoRA, `generate()` (H200)": ("On a real GPU", None),
    "on a GPU: hybrid and vision-language families, small configs and whole models (H200)": (
        "Hybrid and vision-language families on a real GPU", None),
    "single-GPU training steps": ("How close the estimate is", lambda head, row: not _serving(head, row)),
    "serving with `generate()`": ("How close the estimate is", _serving),
    "gradient accumulation": ("Gradient accumulation", None),
    "FSDP2, one rank": ("Sharded training (FSDP2)", None),
    "DDP, one rank": ("Data parallelism through torch DDP", None),
    "pipeline stages (1F1B, interleaved)": ("Pipeline parallelism (1F1B)", None),
    "torchtitan's selective checkpointing": ("torchtitan's selective activation checkpointing", None),
    "hybrid layers (Mamba, DeltaNet, short conv), training": (
        "Hybrid families (Mamba, gated DeltaNet, short convolution)", lambda head, row: " train " in row[0]),
    "other 2025-2026 families (Apertus, OLMo 3, EXAONE 4, GLM-4.5, Llama 4)": (
        "Other 2025-2026 families: Apertus, OLMo 3, EXAONE 4, GLM-4.5, Llama 4", None),
    "vision-language training with images": ("Vision-language training with images", None),
    "vision-language `generate()` with images": ("Vision-language generate() with images", None),
    "LoRA and DoRA through PEFT": ("LoRA through PEFT", None),
    "DPO (TRL's DPOTrainer)": ("DPO (TRL's DPOTrainer)", None),
    "KTO (TRL's KTOTrainer)": ("KTO (TRL's KTOTrainer)", None),
    "GRPO (TRL's GRPOTrainer, `generate()` rollout)": ("GRPO (TRL's GRPOTrainer, rollout by generate())", None),
    "reward models (TRL's RewardTrainer)": ("Reward models (TRL's RewardTrainer)", None),
    "PPO (TRL 0.25.1's PPOTrainer)": ("PPO (TRL 0.25.1's PPOTrainer)", None),
    "on-policy distillation (TRL's DistillationTrainer, `generate()` rollout)": (
        "On-policy distillation (TRL's DistillationTrainer, rollout by generate())", None),
}


def test_the_accuracy_table_is_the_one_docs_validation_gives():
    sections = _sections()
    table = re.search(r"^\| kind of case .*?\n\n", README, re.S | re.M).group(0)
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.strip().splitlines()[2:]]
    assert [row[0] for row in rows] == list(KINDS)
    for kind, cases, median, worst in rows:
        title, keep = KINDS[kind]
        head, data = sections[title]
        errors = [abs(float(row[head.index("error")].rstrip("%"))) for row in data if keep is None or keep(head, row)]
        now = [str(len(errors)), f"{statistics.median(errors):.1f}%", f"{max(errors):.1f}%"]
        assert [cases, median, worst] == now, (
            f"README's accuracy row {kind!r} says {[cases, median, worst]}, docs/validation.md now gives {now}: "
            "update the row")
    textbook = re.search(r"textbook sum .*? is off by ([\d.]+)% in the median and ([\d.]+)% at worst", VALIDATION)
    said = f"off by {round(float(textbook.group(1)))}% in the median and {round(float(textbook.group(2)))}% at worst"
    assert said in " ".join(README.split()), f"the README's textbook comparison should read {said!r}"
