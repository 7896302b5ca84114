"""A pasted, uploaded or fetched config.json as the schema's inputs: its family's preset plus overrides.

The page's import (``web.import_config`` wraps :func:`import_config`) and the tests call this. It reads nothing
from ``web`` or ``estimate``: an import is checked by counting the parameters of the preset with the overrides
applied, which must equal the count of the config itself, so the URL it produces describes the same model.
"""

import json
from typing import Any

from pycore.base.errors import InputError
from pycore.model.architecture import ARCH_FIELDS, Architecture, count_parameters, with_overrides
from pycore.model.catalog import architecture as preset_architecture
from pycore.model.catalog import models
from pycore.model.hf_config import (
    FAMILIES,
    FAMILY_PRESETS,
    LLAMA_STYLE,
    Config,
    architecture_from_dict,
    config_name,
    parse_config_text,
    read_config_file,
)

MAX_CARRIED = 20_000        # characters of a config.json a link carries (a model's is 1-5 thousand without spaces)

# Fields that change the parameter count but have no schema key: named when an import cannot express them.
_FEATURES = {
    "norm": "the norm type", "norm_bias": "LayerNorm bias", "mlp": "the MLP type", "qkv_bias": "q/k/v biases",
    "out_bias": "the attention output bias", "mlp_bias": "MLP biases", "positions": "position embeddings",
    "max_positions": "learned position table size", "type_vocab": "token-type embeddings",
    "embedding_norm": "the embedding norm", "mlm_head": "the masked-LM head", "head_bias": "the output head bias",
    "shared_experts": "the number of shared experts", "shared_expert_ffn": "the shared expert width",
    "shared_expert_gate": "the shared expert gate", "router_bias": "the router bias",
    "dense_layers": "the number of dense (non-MoE) layers", "norms_per_layer": "norms per layer",
    "qk_norm": "query/key norms", "attention": "the attention type", "attention_sinks": "attention sinks",
    "q_lora_rank": "the MLA query rank", "kv_lora_rank": "the MLA key/value rank",
    "qk_rope_dim": "the MLA rotary head size", "qk_nope_dim": "the MLA non-rotary head size",
    "v_head_dim": "the MLA value head size",
    "layer_pattern": "which layers are attention, state-space or convolution", "mlp_pattern": "which layers have experts",
    "dense_ffn": "the dense layers' MLP width", "attn_output_gate": "the attention output gate",
    "expert_bias": "the experts' biases", "mlp_extra_params": "the activation's parameters",
    "ssm_inner": "the Mamba inner width", "ssm_heads": "the Mamba heads", "ssm_head_dim": "the Mamba head size",
    "ssm_state": "the Mamba state size", "ssm_groups": "the Mamba groups", "ssm_dt_rank": "the Mamba time-step rank",
    "ssm_dt_norms": "Jamba's dt/B/C norms", "ssm_norm": "the Mamba gated norm", "ssm_proj_bias": "Mamba projection biases",
    "conv_kernel": "the convolution width", "conv_bias": "convolution biases",
    "linear_key_heads": "the linear-attention key heads", "linear_value_heads": "the linear-attention value heads",
    "linear_key_dim": "the linear-attention key size", "linear_value_dim": "the linear-attention value size",
    "vision_qkv_bias": "the vision tower's q/k/v biases", "vision_rms_norm": "the vision tower's RMSNorms",
    "vision_qk_norm": "the vision tower's query/key norms", "vision_deepstack": "the vision tower's deepstack mergers",
}
# Fields with no schema key that change what images cost but not the count (pycore/model/vision.py: the image tokens,
# what gets a gradient): an import that differs from its preset in one carries the config itself
_VISION = {"vision_keep_cls": "the image's class-token feature", "vision_unused_layers": "the vision tower's feature layer",
           "vision_pinpoints": "the image's crop grids (image_grid_pinpoints)"}


# Fields that change the memory estimate but not the count and have no schema key: an import that differs from its
# preset in one of them is estimated with the preset's value, and says so.
_CARRIED = {"sliding_window": "sliding window", "global_every": "global-layer period",
            "activation": "activation", "softmax_fp32": "fp32 softmax", "dropout": "dropout",
            "attention_dropout": "attention dropout", "parallel_block": "parallel attention/MLP block"}


def _family(config: Config) -> str:
    """The model_type whose preset an imported config is expressed against (architecture_from_dict has
    checked that a model_type given is a string)."""
    if isinstance(config.get("text_config"), dict):
        inner = config["text_config"].get("model_type")
        return inner if isinstance(inner, str) and inner in FAMILIES else "gemma3_text"
    model_type = config.get("model_type")
    return model_type if isinstance(model_type, str) and model_type in FAMILIES else LLAMA_STYLE


def _overrides(arch: Architecture, preset: Architecture) -> "list[tuple[str, str]]":
    """(key, text) pairs of the schema's architecture keys where ``arch`` differs from ``preset``."""
    pairs = []
    for key in ARCH_FIELDS:
        field = "tied_embeddings" if key == "tied" else key
        ours, theirs = getattr(arch, field), getattr(preset, field)
        if key == "head_dim" and not arch.head_dim:
            if preset.head_dim and preset.head_dim != arch.dim_head:
                pairs.append((key, str(arch.dim_head)))     # the preset's explicit head_dim would stick
            continue
        if key == "max_positions" and not ours:
            continue                                        # the config does not say: the preset's stands
        follows = key == "kv_heads" and preset.kv_heads == preset.heads and arch.heads != preset.heads
        if ours != theirs or (follows and arch.kv_heads != arch.heads):
            # with_overrides keeps a multi-head preset multi-head when heads change: say kv_heads if it is not
            pairs.append((key, ("yes" if ours else "no") if key == "tied" else str(ours)))
    return pairs


def _inexpressible(arch: Architecture, preset: Architecture) -> "list[str]":
    """Plain words for the count-changing fields in which ``arch`` and ``preset`` differ."""
    learned = arch.positions == "learned" or preset.positions == "learned"
    return [f"{words} ({field} {getattr(arch, field)!r}, the preset has {getattr(preset, field)!r})"
            for field, words in _FEATURES.items()
            if getattr(arch, field) != getattr(preset, field) and (field != "max_positions" or learned)]


def _candidates(family: str, arch: Architecture) -> "list[str]":
    """Preset ids to express an import against: the family's own first, then the others of its class."""
    first = FAMILY_PRESETS.get(family)
    others = sorted(model_id for model_id, entry in models().items()
                    if entry.get("hf_class") == arch.hf_class and model_id != first)
    return ([first] if first else []) + others


def import_config(text: str) -> "dict[str, Any]":
    """A config.json's text as schema inputs.

    Args:
        text: the contents of a Hugging Face config.json.
    Returns:
        {"query": [[key, value], ...], "params": int, "message": str, "warnings": [str]} where query is the
        family's preset plus the architecture keys that differ, or {"error": str} with one plain sentence naming
        what is wrong (invalid JSON, a field's type or range, a missing field, a feature the inputs cannot express).
    """
    warnings: "list[str]" = []
    preset, query, expressed = None, [], None
    try:
        config = parse_config_text(text)
        arch = architecture_from_dict(config, warnings=warnings)
        family = _family(config)
        expected = count_parameters(arch).total
        for number, model_id in enumerate(_candidates(family, arch)):
            candidate = preset_architecture(model_id)
            pairs = [list(pair) for pair in _overrides(arch, candidate)]
            try:
                count = count_parameters(with_overrides(candidate, {k: _typed(k, v) for k, v in pairs})).total
            except ValueError:                      # these overrides do not fit this preset: try the next
                count = None
            if number == 0:
                preset, query, expressed = candidate, [["model", model_id]] + pairs, count
            if count == expected:
                preset, query, expressed = candidate, [["model", model_id]] + pairs, count
                break
    except InputError as error:
        plain = _plain(error)
        return {"error": plain if plain.startswith("config.json") else "config.json: " + plain}
    except (ValueError, KeyError, TypeError, RecursionError, MemoryError) as error:
        # A guard: every known problem is an InputError above; anything else still answers in one line.
        return {"error": f"config.json could not be read ({type(error).__name__})"}
    if preset is None or expressed != expected or any(getattr(arch, f) != getattr(preset, f) for f in _VISION):
        learned = preset is not None and "learned" in (arch.positions, preset.positions)
        differ = None if preset is None else [words for field, words in {**_FEATURES, **_VISION}.items()
                                              if getattr(arch, field) != getattr(preset, field)
                                              and (field != "max_positions" or learned)]
        return _carried(config, family, expected, warnings, differ)
    for field, words in _CARRIED.items():
        ours, theirs = getattr(arch, field), getattr(preset, field)
        unknown = field in ("max_positions", "sliding_window", "global_every") and not ours or \
            field == "max_positions" and not theirs         # not read from this family's config, or not in the preset
        if ours != theirs and not unknown:
            warnings.append(f"The config's {words} ({field} {ours!r}) has no input key: the estimate uses "
                            f"{preset.name}'s ({theirs!r}).")
    model_type = config.get("model_type")
    shown = model_type if isinstance(model_type, str) else family
    name = config_name(config)
    family_words = f"{'an' if shown[:1].lower() in tuple('aeio') else 'a'} {shown[:40]} config"   # an apertus config
    what = family_words if name == "imported config" else f"{name} ({family_words})"
    message = (f"Imported {what}: {expected:,} parameters. Closest preset: {preset.name}, "
               f"with {len(query) - 1} override{'s' if len(query) != 2 else ''}.")
    # The link carries the config's own name: the results call the model what it is, not its closest preset.
    return {"query": query + [["name", name]], "params": expected, "message": message, "warnings": warnings}


def _carried(config: Config, family: str, expected: int, warnings: "list[str]", features: "list[str] | None") -> \
        "dict[str, Any]":
    """An import no preset with overrides expresses: the link carries the config.json itself (``config=`` its compact
    text, which pycore reads as the command line reads a file), the model field its name."""
    text = json.dumps(config, separators=(",", ":"))
    if len(text) > MAX_CARRIED:
        return {"error": f"config.json: this {family} model has {expected:,} parameters; no preset with overrides "
                         f"expresses it, and its text ({len(text):,} characters without spaces) is over the "
                         f"{MAX_CARRIED:,} a link carries. Estimate it on the command line: python -m pycore "
                         "config=config.json"}
    name = config_name(config)
    why = f"there is no {family} preset" if features is None else \
        f"no preset with overrides matches it in {', '.join(features[:4]) or 'a feature the inputs have no key for'}"
    model_type = str(config.get("model_type") or family)[:40]
    what = f"a config.json (model_type {model_type})" if name == "imported config" else f"{name} (model_type {model_type})"
    message = f"Imported {what}: {expected:,} parameters, read from the config itself ({why}); the link carries it."
    return {"query": [["model", name], ["config", text], ["name", name]], "params": expected, "message": message,
            "warnings": warnings, "carried": True}


def file_notes(path: str) -> "list[str]":
    """What the command line says of ``config=path``: the import's warnings (an unknown model_type read
    Llama-style, ...) and its closest preset, as the page's import says them; [] when it cannot be read."""
    try:
        answer = import_config(read_config_file(path))
    except InputError:
        return []
    if "error" in answer:
        return []
    # a config no preset expresses is read from itself: the page's words about its link are not the command line's
    return [*answer["warnings"]] + ([] if answer.get("carried") else [answer["message"]])


def _typed(key: str, value: str) -> "str | int":
    return value if key == "tied" else int(value)


def _plain(error: InputError) -> str:
    message = str(error)
    return message[len("config: "):] if message.startswith("config: ") else message
