"""Command line: ``python -m pycore [--json|--csv] KEY=VALUE ...``, ``models``, ``gpus``, ``schema``."""

import json
import sys

from . import catalog, report
from .answers import answer
from .estimate import estimate_values
from .schema import InputError, markdown_table, parse

USAGE = """usage: python -m pycore [--json | --csv] KEY=VALUE ...
       python -m pycore models | gpus | schema

Estimates GPU memory per device for a training step or for serving. Keys: see docs/inputs.md
or `python -m pycore schema`. Sizes are shown in GiB (2^30 bytes)."""


def parse_arguments(words):
    """(output format, key -> value) from KEY=VALUE words; InputError on a malformed word."""
    fmt, raw = "table", {}
    for word in words:
        if word in ("--json", "--csv"):
            fmt = word[2:]
        elif "=" in word and not word.startswith("-"):
            key, value = word.split("=", 1)
            if key in raw:
                raise InputError(key, "given twice")
            raw[key] = value
        else:
            raise InputError(word[:40], "expected KEY=VALUE, --json or --csv")
    return fmt, raw


def main(argv=None):
    words = sys.argv[1:] if argv is None else argv
    if words and words[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if words == ["models"]:
        for model_id, entry in catalog.models().items():
            print(f"{model_id:28s} {entry['params']:>16,d}  {entry['source']}")
        return 0
    if words == ["gpus"]:
        for gpu_id, gpu in catalog.gpus().items():
            print(f"{gpu_id:22s} {gpu['usable_bytes'] / 2**30:8.2f} GiB usable ({gpu['usable_source']}); "
                  f"{gpu['datasheet']}; price: {gpu['price_source']}")
        return 0
    if words == ["schema"]:
        sys.stdout.write(markdown_table())
        return 0
    try:
        fmt, raw = parse_arguments(words)
        values = parse(raw)
        result = estimate_values(values)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    answers = answer(values, result)
    if fmt == "json":
        print(json.dumps({**result, "answers": answers}, indent=1))
    elif fmt == "csv":
        sys.stdout.write(report.to_csv(values, result, answers))
    else:
        sys.stdout.write(report.table(result, answers))
    return 0
