"""The model and GPU catalogs, read lazily from the JSON files in presets/.

From a checkout they sit in ``presets/`` beside the package; an installed wheel carries them as
``pycore/presets``; the browser bundle keeps the checkout layout.
"""

import json
import re
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
    """Every name a preset answers to, in lower case -> the preset id it names: its id, its aliases, its hub
    repository ids ("hub": meta-llama/Llama-3.1-8B, from its source), and each id or alias under the owner of
    those repositories (meta-llama/llama-3.1-8b-instruct: an alias is the same architecture, the owner the
    same organisation). Look names up in lower case (``preset_id``): people copy hub ids in any case."""
    table: "dict[str, str]" = {}
    for entry in models().values():
        names = [entry["id"], *entry.get("aliases", ())]
        owners = dict.fromkeys(hub.split("/")[0] for hub in entry.get("hub", ()))
        for name in [*names, *entry.get("hub", ()), *(f"{owner}/{name}" for owner in owners for name in names)]:
            table.setdefault(name.lower(), entry["id"])
    return table


def preset_id(name: str) -> "str | None":
    """The preset id a model name resolves to (an id, an alias or a hub id, in any case), or None: the one
    resolution of every model= the command line, the page and the library take."""
    return model_aliases().get(name.strip().lower())


HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9_.-]{1,96}")


def hub_id(name: str) -> "str | None":
    """``name`` when it has the form of a Hugging Face hub repository id (owner/name, the characters the hub
    allows), else None; whether a preset has it is ``preset_id``'s question."""
    name = name.strip()
    return name if HUB_ID.fullmatch(name) and ".." not in name else None


_NOT_ARCH = {"id", "aliases", "hub", "params", "source"}


@lru_cache(maxsize=256)
def architecture(model_id: str) -> Architecture:
    """The Architecture of a preset id, alias or hub id (any case). Raises KeyError if unknown."""
    found = preset_id(model_id)
    if found is None:
        raise KeyError(model_id)
    entry = models()[found]
    fields = {k: v for k, v in entry.items() if k not in _NOT_ARCH}
    if fields.get("kind") == "generic":
        fields["params_override"] = entry["params"]
    return Architecture(name=entry["id"], source=entry["source"], **fields)


@lru_cache(maxsize=None)
def gpus() -> "dict[str, Entry]":
    """GPU catalog by id, in the file's order."""
    return {entry["id"]: entry for entry in _load("gpus.json")["gpus"]}
