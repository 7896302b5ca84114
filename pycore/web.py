"""The page's one entry point: a query string in, a JSON string out. No DOM here.

Bad values never stop the estimate: each one is reported under its key and replaced by its default,
and every other input is kept.
"""

import json
from urllib.parse import parse_qsl

from . import report
from .answers import answer
from .architecture import ARCH_FIELDS, count_parameters
from .catalog import architecture as preset_architecture
from .compare import compare
from .estimate import estimate_values
from .explain import formulas
from .hf_config import FAMILY_PRESETS, architecture_from_dict
from .schema import BY_KEY, DEFAULTS, InputError, parse, to_query


def _pairs(query):
    """Key -> last value of a query string (base.KEY under its own key), and messages for repeated or
    unknown keys."""
    raw, errors = {}, {}
    for key, value in parse_qsl(query.lstrip("?"), keep_blank_values=True):
        if key.removeprefix("base.") not in BY_KEY:
            errors[key[:40]] = f"{key[:40]}: unknown key, ignored"
            continue
        if key in raw:
            errors[key] = f"{key}: given more than once; the last value is used"
        raw[key] = value
    return raw, errors


def _estimate(query):
    """(values, result or None, errors, baseline inputs) for a query string; bad inputs fall back to their
    defaults."""
    raw, errors = _pairs(query)
    base_raw = {k[5:]: v for k, v in raw.items() if k.startswith("base.") and v != ""}
    raw = {k: v for k, v in raw.items() if v != "" and not k.startswith("base.")}
    values, parse_errors = parse(raw, strict=False)
    errors.update(parse_errors)
    if base_raw and values["compare"] == "off":
        values["compare"] = "baseline"
    for _ in range(len(BY_KEY)):
        try:
            return values, estimate_values(values), errors, base_raw
        except InputError as error:
            key = error.key if error.key in BY_KEY else "model"
            errors[key] = str(error)
            if values[key] == DEFAULTS[key]:       # the default itself fails: nothing left to try
                break
            values[key] = DEFAULTS[key]
    return values, None, errors, base_raw


def _answers(values, result, base_raw, errors):
    answers = answer(values, result)
    answers["comparison"] = None
    if values["compare"] != "off":
        try:
            answers["comparison"] = compare(values, result, base_raw)
        except InputError as error:
            errors[error.key] = str(error)
    return answers


def run(query):
    """Estimate for a URL query string; returns JSON with result, breakdown, formulas, errors, query.

    The answers, which re-run the estimate many times, come from ``answers`` so typing stays fast.
    """
    values, result, errors, _ = _estimate(query)
    payload = {"errors": errors, "query": to_query(values)}
    if result is not None:
        payload.update(result=result, breakdown=report.breakdown(result), formulas=formulas(values, result))
    return json.dumps(payload)


def answers(query):
    """JSON with the answers (GPUs needed, largest batch and sequence, cost, how to fit, comparison) and
    any message about baseline inputs."""
    values, result, errors, base_raw = _estimate(query)
    if result is None:
        return json.dumps({"answers": None, "errors": errors})
    return json.dumps({"answers": _answers(values, result, base_raw, errors), "errors": errors})


def csv(query):
    """The CSV download for a URL query string: the same bytes as ``python -m pycore --csv``."""
    values, result, errors, base_raw = _estimate(query)
    if result is None:
        return ""
    return report.to_csv(values, result, _answers(values, result, base_raw, errors))


def import_config(text):
    """A pasted, uploaded or fetched config.json as schema inputs: its family's preset plus overrides.

    Returns JSON with ``query`` (key, value pairs for the form and URL), ``params`` and ``message``, or
    ``error`` naming what is missing or unsupported.
    """
    try:
        config = json.loads(text)
        if not isinstance(config, dict):
            raise ValueError("expected a JSON object")
        arch = architecture_from_dict(config)
    except (ValueError, InputError) as error:
        message = str(error).removeprefix("config: ")
        return json.dumps({"error": f"config.json: {message[:300]}"})
    model_type = config.get("model_type") if "text_config" not in config else "gemma3_text"
    preset = preset_architecture(FAMILY_PRESETS[model_type])
    query = [("model", preset.name)]
    for key in ARCH_FIELDS:
        ours = getattr(arch, "tied_embeddings" if key == "tied" else key)
        theirs = getattr(preset, "tied_embeddings" if key == "tied" else key)
        if key == "head_dim" and not arch.head_dim:
            continue                                # derived from hidden / heads
        if ours != theirs:
            query.append((key, ("yes" if ours else "no") if key == "tied" else str(ours)))
    expected = count_parameters(arch).total
    _, result, _, _ = _estimate("&".join(f"{k}={v}" for k, v in query))
    if result is None or result["params"]["total"] != expected:
        return json.dumps({"error": "config.json: this architecture has features the inputs cannot express yet "
                                    f"(expected {expected:,} parameters); try the nearest preset"})
    return json.dumps({"query": query, "params": expected,
                       "message": f"Imported a {model_type} config: {expected:,} parameters, "
                                  f"expressed as {preset.name} with {len(query) - 1} overrides."})
