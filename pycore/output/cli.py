"""Command line: ``python -m pycore [--json|--csv] KEY=VALUE ...``, ``models``, ``gpus``, ``schema``,
``header=PATH``, ``--calibrate FILE``."""

import json
import sys
from typing import Any

from pycore.answers.answer import answer
from pycore.answers.compare import compare, precision_default
from pycore.answers.fit import gpu_fits
from pycore.base.errors import FieldError
from pycore.base.steps import finish
from pycore.base.units import GIB, printable
from pycore.inputs.applies import describe, ignored
from pycore.inputs.schema import markdown_table, parse
from pycore.memory.estimate import estimate_values
from pycore.model import catalog
from pycore.model.config_import import file_notes
from pycore.output import export, report

USAGE = """usage: python -m pycore [--json | --csv | --markdown] [--gpus all] KEY=VALUE ... [--compare KEY=VALUE ...]
       python -m pycore fits [--json] gpu=ID gpus=N KEY=VALUE ...   (which presets fit on N GPUs)
       python -m pycore --export vllm|trainer|deepspeed|accelerate|torchtitan|torchtune KEY=VALUE ...
                                                             (launch settings for that setup)
       python -m pycore --calibrate FILE [--json] KEY=VALUE ...   (a pasted vLLM log, PyTorch memory figures or an
                                               nvidia-smi reading against that setup's estimate; - reads stdin)
       python -m pycore models | gpus | schema
       python -m pycore header=PATH [--json]   (exact weight bytes from a checkpoint's headers: a .safetensors
                                               file, a model.safetensors.index.json, a folder of shards, a .gguf)

Estimates GPU memory per device for a training step or for serving. Keys: see docs/inputs.md
or `python -m pycore schema`. Sizes are shown in GiB (2^30 bytes). The table lists the chosen GPU, the
smallest GPU that fits and the largest that does not (--gpus all: every GPU); --markdown prints the
breakdown, setup and fit as Markdown, to paste into an issue or a chat."""


FORMATS = ("--json", "--csv", "--markdown")


def take_option(words: "list[str]", name: str) -> "tuple[list[str], str | None]":
    """The words without ``name VALUE`` (or ``name=VALUE``), and the value (None when not given; "" when the
    option ends the words)."""
    rest: "list[str]" = []
    value = None
    items = iter(words)
    for word in items:
        if word == name or word.startswith(name + "="):
            value = word[len(name) + 1:] if word.startswith(name + "=") else next(items, "")
        else:
            rest.append(word)
    return rest, value


def export_option(words: "list[str]") -> "tuple[list[str], str]":
    """The words without ``--export KIND`` (or ``--export=KIND``), and the kind ("" when not given)."""
    rest, kind = take_option(words, "--export")
    if kind is not None and kind not in export.KINDS:
        raise FieldError("--export", f"got {printable(kind[:40])!r}; accepts {' | '.join(export.KINDS)}")
    return rest, kind or ""


def every_gpu(words: "list[str]") -> "tuple[list[str], bool]":
    """The words without ``--gpus all`` (or ``--gpus=all``), and whether it was given: the text table then
    lists every catalog GPU, not the chosen one, the smallest that fits and the largest that does not."""
    rest, value = take_option(words, "--gpus")
    if value is not None and value != "all":
        raise FieldError("--gpus", f"got {printable(value[:40])!r}; accepts all (every GPU in the table)")
    return rest, value is not None


def parse_arguments(words: "list[str]") -> "tuple[str, dict[str, Any], dict[str, Any]]":
    """(output format, key -> value, baseline key -> value) from the words; InputError on a malformed one.

    Words after --compare change the baseline, as base.KEY=VALUE does in the URL.
    """
    fmt = "table"
    raw: dict[str, Any] = {}
    base: dict[str, Any] = {}
    target = raw
    for word in words:
        if word in FORMATS:
            fmt = word[2:]
        elif word == "--compare":
            target = base
            raw.setdefault("compare", "baseline")
        elif "=" in word and not word.startswith("-"):
            key, value = word.split("=", 1)
            if key.startswith("base."):
                key, target_now = key[5:], base
                raw.setdefault("compare", "baseline")
            else:
                target_now = target
            if key in target_now:
                raise FieldError(_printable(key[:40]), "given twice")
            target_now[key] = value
        else:
            raise FieldError(_printable(word[:40]), "expected KEY=VALUE, --json, --csv, --markdown, --gpus all or "
                                                    "--compare")
    return fmt, raw, base


def _printable(text: str) -> str:
    """Text safe to echo to a terminal: control and format characters (U+202E...) shown as '?'."""
    return printable(text)


def main(argv: "list[str] | None" = None) -> int:
    """The console script: the exit status (0 done, 2 bad input); a closed pipe ends it quietly."""
    try:
        return _main(argv)
    except BrokenPipeError:         # output piped into head and the like
        sys.stderr.close()
        return 0


def _subcommand(words: "list[str]") -> "int | None":
    """The exit status of fits, header=, --export, --calibrate, the listings and help; None for an estimate."""
    if words and words[0] == "fits":
        return _fits(words[1:])
    if any(word.startswith("header=") for word in words):
        return _header(words)
    if any(word == "--export" or word.startswith("--export=") for word in words):
        return _export(words)
    if any(word == "--calibrate" or word.startswith("--calibrate=") for word in words):
        return _calibrate(words)
    if words and (words[0] in ("-h", "--help") or words in (["models"], ["gpus"], ["schema"])):
        sys.stdout.write(_listing(words[0]))
        return 0
    return None


def _export(words: "list[str]") -> int:
    """python -m pycore --export KIND KEY=VALUE...: the launch settings for that setup (pycore.output.export)."""
    try:
        words, kind = export_option(words)
        _, raw, _ = parse_arguments(words)
        values = parse(raw)
        result = estimate_values(values)
        sys.stdout.write(export.export(kind, values, result) + "\n")
        if result.refused and kind == "vllm":       # the line as asked, and that vLLM would stop at its start-up check
            print(f"note: this line starts nothing as it stands: {result.refused}", file=sys.stderr)
    except FieldError as error:
        print(f"error: {_printable(str(error))}", file=sys.stderr)
        return 2
    return 0


def _calibrate(words: "list[str]") -> int:
    """python -m pycore --calibrate FILE [--json] KEY=VALUE...: the figures FILE states against the estimate of
    that setup, and the overrides that reproduce them (pycore.answers.calibrate; the file is only read)."""
    from pycore.answers.calibrate import calibrate
    from pycore.output.calibration import display, text
    try:
        path, rest = calibrate_option(words)
        as_json = "--json" in rest
        rest = [word for word in rest if word != "--json"]
        _, raw, _ = parse_arguments(rest)
        result = calibrate(parse(raw), _read_pasted(path))
    except FieldError as error:
        print(f"error: {_printable(str(error))}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"error: calibrate: {_printable(str(error.strerror or error))}: {_printable(path[:200])}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps({**result.as_dict(), "display": display(result)}, indent=1, allow_nan=False))
    else:
        replaced = dict(result.overrides)       # a key given again would be refused as given twice
        sys.stdout.write(text(display(result), " ".join(w for w in rest if w.split("=", 1)[0] not in replaced)))
    return 0


def calibrate_option(words: "list[str]") -> "tuple[str, list[str]]":
    """The FILE of ``--calibrate FILE`` (or ``--calibrate=FILE``) and the other words."""
    rest, path = take_option(words, "--calibrate")
    if not path:
        raise FieldError("--calibrate", "takes a FILE with the pasted text (- for stdin): python -m pycore "
                                        "--calibrate FILE KEY=VALUE ...")
    return path, rest


def _read_pasted(path: str) -> str:
    """The text of FILE (stdin for -), at most one character past the limit calibrate reads."""
    from pathlib import Path

    from pycore.answers.calibrate import MAX_CHARS
    if path == "-":
        return sys.stdin.read(MAX_CHARS + 1)
    if not Path(path).is_file():
        raise FieldError("--calibrate", f"not a regular file: {path[:200]}")
    with open(path, encoding="utf-8", errors="replace") as pasted:
        return pasted.read(MAX_CHARS + 1)


def _fits(words: "list[str]") -> int:
    """python -m pycore fits [--json] gpu=ID gpus=N KEY=VALUE...: every preset on those GPUs."""
    from pycore.answers.what_fits import what_fits
    try:
        fmt, raw, _ = parse_arguments(words)
        values = parse(raw)
        if values["gpu"] not in catalog.gpus():
            raise FieldError("gpu", f"unknown GPU {values['gpu'][:40]!r}; see python -m pycore gpus")
    except FieldError as error:
        print(f"error: {_printable(str(error))}", file=sys.stderr)
        return 2
    count = values["gpus"] or 1
    rows = what_fits(values, count)
    if fmt == "json":
        print(json.dumps(rows, indent=1))
        return 0
    width = max([28, *(len(row["id"]) for row in rows)])      # the columns stay put for a long model id
    print(f"{'model':{width}s} {'params':>16s} {'per GPU':>13s} {'headroom':>13s} status  layout")
    for row in rows:
        layout = " ".join(f"{k}={v}" for k, v in row["layout"].items())
        if row["total_bytes"] is None:
            print(f"{row['id']:{width}s} {row['params']:16,d} {'':>13s} {'':>13s} {'no':6s}  {row['error']}")
            continue
        print(f"{row['id']:{width}s} {row['params']:16,d} {row['total_bytes'] / GIB:9,.2f} GiB "
              f"{row['headroom_bytes'] / GIB:9,.2f} GiB {row['status']:6s}  {layout}"
              + (f"  ({row['note']})" if row["note"] else ""))
    print(f"\n{count} × {values['gpu']}; GiB = 2^30 bytes.")
    return 0


def _header(words: "list[str]") -> int:
    """python -m pycore header=PATH [--json]: the weights' exact bytes, read from the checkpoint's headers only."""
    from pycore.model.checkpoint import read_path
    paths = [word[len("header="):] for word in words if word.startswith("header=")]
    try:
        if len(paths) != 1 or any(word != "--json" and not word.startswith("header=") for word in words):
            raise FieldError("header", "takes one PATH and nothing else but --json: python -m pycore header=PATH [--json]")
        found = read_path(paths[0])
    except FieldError as error:
        print(f"error: {_printable(str(error))}", file=sys.stderr)
        return 2
    except OSError as error:                # unreadable: permissions, a device, a file gone meanwhile
        print(f"error: header: {_printable(str(error.strerror or error))}: {_printable(paths[0][:200])}",
              file=sys.stderr)
        return 2
    for note in found.notes:
        print(f"note: {_printable(note)}", file=sys.stderr)
    if "--json" in words:
        print(json.dumps(found.as_dict(), indent=1, allow_nan=False))
    else:
        sys.stdout.write(header_text(found.as_dict()))
    return 0


POOL_LABELS = {"embedding": "embedding", "attention": "layers: attention (or other mixer)", "mlp": "layers: MLP",
               "norms": "layers: norms", "experts": "routed experts", "head": "head and final norm",
               "vision": "vision tower and projector", "other": "other"}


def header_text(shown: "dict[str, Any]") -> str:
    """A checkpoint's headers as text: exact bytes, with GiB (2^30 bytes) beside them, by pool and by dtype."""
    files = shown["files"]
    named = files[0] if len(files) == 1 else f"{len(files)} files ({files[0]} ... {files[-1]})"
    lines = [f"Checkpoint: {_printable(named)} ({shown['format']}), {shown['tensors']:,} tensors; "
             f"{shown['header_bytes']:,} header bytes read",
             f"Weights: {shown['total_bytes']:,} bytes = {shown['total_bytes'] / GIB:,.3f} GiB (GiB = 2^30 bytes), "
             f"{shown['elements']:,} numbers stored",
             "", f"{'pool':36s} {'bytes':>20s} {'GiB':>12s}"]
    rows = [(POOL_LABELS.get(pool, pool), size) for pool, size in shown["by_pool"].items()]
    rows.append(("layers in all (attention, MLP, norms)", shown["layers_bytes"]))
    rows += [("", -1), ("dtype", -1)] + [(dtype, size) for dtype, size in shown["by_dtype"].items()]
    for label, size in rows:
        lines.append(f"{_printable(label):36s} {size:>20,d} {size / GIB:>12,.3f}" if size >= 0 else label)
    arch = shown["architecture"]
    if arch:
        lines += ["", "Architecture (GGUF metadata): " + ", ".join(f"{key} {_printable(str(value))[:40]}"
                                                                  for key, value in arch.items())]
    lines += ["", "From the checkpoint's headers; a packed tensor (GPTQ's I32 qweight, MXFP4's U8 blocks) counts the "
                  "numbers it stores, not the weights it packs."]
    return "\n".join(lines) + "\n"


def _listing(word: str) -> str:
    """The usage text, or a catalog with its sources: models, gpus, or the inputs' schema."""
    if word == "models":
        return "".join(f"{model_id:28s} {entry['params']:>16,d}  {entry['source']}\n"
                       for model_id, entry in catalog.models().items())
    if word == "gpus":
        return "".join(f"{gpu_id:22s} {gpu['usable_bytes'] / GIB:8.2f} GiB usable ({gpu['usable_source']}); "
                       f"{gpu['datasheet']}; price: {gpu['price_source']}\n" for gpu_id, gpu in catalog.gpus().items())
    return markdown_table() if word == "schema" else USAGE + "\n"


def _main(argv: "list[str] | None" = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    done = _subcommand(words)
    if done is not None:
        return done
    try:
        words, every = every_gpu(words)
        fmt, raw, base = parse_arguments(words)
        values = parse(raw)
        result = estimate_values(values)
        answers = answer(values, result)
        answers["precision_default"] = finish(precision_default(values, result))
        answers["comparison"] = compare(values, result, base, answers) if values["compare"] != "off" else None
    except FieldError as error:
        print(f"error: {_printable(str(error))}", file=sys.stderr)
        return 2
    notes = [describe(key, values) for key in ignored(values, list(raw))]
    read = [note for note in (file_notes(values["config"]) if values.get("config") else []) if note not in result.warnings]
    for note in notes + read:
        print(f"note: {_printable(note)}", file=sys.stderr)
    if fmt == "json":
        gpus = gpu_fits(result.total_bytes, values["gpu"], result.refused, values)
        shown = report.result_json(result)
        shown["warnings"] = [*shown["warnings"], *read]
        print(json.dumps({**shown, "gpus": gpus, "answers": answers, "ignored": notes}, indent=1,
                         allow_nan=False))
    elif fmt == "csv":
        sys.stdout.write(report.to_csv(values, result, answers))
    elif fmt == "markdown":
        sys.stdout.write(report.share(values, result)["markdown"])     # the page's "Copy results", as is
    else:
        sys.stdout.write(report.table(result, answers, values["gpu"], every, values))
        if answers["precision_default"]:
            sys.stdout.write(f"\n{answers['precision_default']['text']}\n")
        sys.stdout.write(comparison_text(report.display_comparison(answers["comparison"])))
    return 0


def comparison_text(shown: "dict[str, Any] | None") -> str:
    """The comparison as text: the page's table (report.display_comparison), cell for cell."""
    if not shown:
        return ""
    labels, rows = shown["labels"], shown["rows"]
    # every label in full and every column as wide as its widest cell: nothing cut, nothing pushed out of line
    width = max([46, *(len(row["label"]) for row in rows)])
    columns = {key: max([18 if key != "difference" else 14, len(labels[key]), *(len(row[key]) for row in rows)])
               for key in ("this", "baseline", "difference")}

    def line(label: str, cells: "dict[str, str]") -> str:
        return f"{label:{width}s} " + " ".join(f"{cells[key]:>{size}s}" for key, size in columns.items())

    lines = ["", f"Compared with {shown['what']}", shown["message"], "", line("", labels)]
    lines += [line(row["label"], row) for row in rows]
    return "\n".join(lines) + "\n"
