"""The model and GPU catalogs, read lazily from the JSON files in presets/.

From a checkout they sit in ``presets/`` beside the package; an installed wheel carries them as
``pycore/presets``; the browser bundle keeps the checkout layout.
"""

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from pycore.model.architecture import Architecture

_PACKAGE = Path(__file__).resolve().parent.parent  # pycore/
Entry = dict[str, Any]      # one record of presets/models.json or gpus.json, as JSON: its fields vary by kind


def _presets_dir() -> Path:
    for candidate in (_PACKAGE / "presets", _PACKAGE.parent / "presets"):
        if (candidate / "models.json").is_file():
            return candidate
    raise FileNotFoundError("presets/models.json not found beside pycore")


@lru_cache(maxsize=None)
def _load(name: str) -> "dict[str, Any]":
    """A catalog file: {"_about": "...", "models": [Entry, ...]} (or "gpus")."""
    with open(_presets_dir() / name, encoding="utf-8") as handle:
        catalog: "dict[str, Any]" = json.load(handle)
    return catalog


@lru_cache(maxsize=None)
def models() -> "dict[str, Entry]":
    """Model presets by id, sorted by id; aliases point at the same entry."""
    entries = sorted(_load("models.json")["models"], key=lambda entry: entry["id"])
    return {entry["id"]: entry for entry in entries}


@lru_cache(maxsize=None)
def model_aliases() -> "dict[str, str]":
    """Every id and alias -> the preset id it names."""
    table = {}
    for entry in models().values():
        table[entry["id"]] = entry["id"]
        for alias in entry.get("aliases", ()):
            table[alias] = entry["id"]
    return table


_NOT_ARCH = {"id", "aliases", "params", "source"}


@lru_cache(maxsize=256)
def architecture(model_id: str) -> Architecture:
    """The Architecture of a preset id or alias. Raises KeyError if unknown."""
    entry = models()[model_aliases()[model_id.lower()]]
    fields = {k: v for k, v in entry.items() if k not in _NOT_ARCH}
    if fields.get("kind") == "generic":
        fields["params_override"] = entry["params"]
    return Architecture(name=entry["id"], source=entry["source"], **fields)


@lru_cache(maxsize=None)
def gpus() -> "dict[str, Entry]":
    """GPU catalog by id, in the file's order."""
    return {entry["id"]: entry for entry in _load("gpus.json")["gpus"]}
