"""The page's one entry point: a query string in, a JSON string out. No DOM here.

Bad values never stop the estimate: each one is reported under its key and replaced by its default,
and every other input is kept. Repeated keys take their last value (as URLSearchParams.getAll()[-1]).
"""

import json
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import parse_qsl

from pycore.answers.answer import answer_steps
from pycore.answers.compare import compare_steps, precision_default
from pycore.answers.fit import gpu_fit, gpu_fits, sizes_itself
from pycore.base.errors import FieldError
from pycore.base.steps import Steps, finish
from pycore.base.units import GIB, format_bytes, plural, printable
from pycore.inputs.applies import describe, ignored
from pycore.inputs.schema import BY_KEY, DEFAULTS, parse, to_query
from pycore.memory.estimate import Estimate, estimate_values, totals_only
from pycore.model.catalog import hub_id, preset_id
from pycore.model.hf_config import is_config_text
from pycore.output import export, report
from pycore.output.explain import formulas as explain_formulas

if TYPE_CHECKING:
    from pycore.model.checkpoint import Checkpoint

MAX_QUERY = 200_000         # characters of a query string that are read at all
MAX_KEYS = 200              # key=value pairs that are read
# A link must not read files: an imported config travels as preset + overrides, or (no preset expresses it) as the
# config.json's own text (config_import's _carried), never as a path; the other models named by a preset or (on the
# command line) a config.json path take no path from a link either.
NOT_FROM_LINKS = {"config"}
NO_PATHS_FROM_LINKS = {"teacher", "reward_model", "value_model", "draft_model"}


def _pairs(query: str) -> "tuple[dict[str, Any], dict[str, Any]]":
    """Key -> last value of a query string (base.KEY under its own key), and messages for repeated,
    unknown or refused keys."""
    raw: dict[str, Any] = {}
    errors: dict[str, Any] = {}
    pairs = parse_qsl(query[:MAX_QUERY].lstrip("?"), keep_blank_values=True, max_num_fields=None)
    if len(pairs) > MAX_KEYS:
        errors["query"] = f"query: {len(pairs):,} inputs given; the first {MAX_KEYS} are read"
        pairs = pairs[:MAX_KEYS]
    for key, value in pairs:
        name = key.removeprefix("base.")
        shown = _printable(key[:40])
        if name not in BY_KEY:
            errors[shown] = f"{shown}: unknown key, ignored"
            continue
        if name in NOT_FROM_LINKS and not is_config_text(value):
            errors[shown] = f"{shown}: a link carries a config.json's own text, not a path; import the config.json " \
                            "on the page instead"
            continue
        if name in NO_PATHS_FROM_LINKS and value.strip().lower().endswith(".json"):
            errors[shown] = f"{shown}: a link names a preset, alias or hub id here, never a file (a config.json path " \
                            "is read on the command line only)"
            continue
        if key in raw:
            errors[key] = f"{key}: given more than once; the last value is used"
        raw[key] = value
    return raw, errors


def _printable(text: str) -> str:
    return printable(text)


def unread(query: str) -> str:
    """The page's line for a link's keys it does not hand to pycore (``config=``, a key no input has),
    given as a query string of those keys: each named as ``printable`` text (a key holding U+202E would
    otherwise reverse the rest of the line), five at most; "" when there are none."""
    keys = list(dict.fromkeys(key for key, _ in parse_qsl(query[:MAX_QUERY].lstrip("?"), keep_blank_values=True)))
    if not keys:
        return ""
    named = ", ".join(printable(key, 40) or "(an empty key)" for key in keys[:5])
    more = f" and {len(keys) - 5:,} more" if len(keys) > 5 else ""
    return f"Ignored {'a key' if len(keys) == 1 else 'keys'} this page does not take from a link: {named}{more}."


def _estimate(query: str, explain: bool = True, fallbacks: "dict[str, Any] | None" = None,
              ) -> "tuple[dict[str, Any], Estimate | None, dict[str, Any], dict[str, Any]]":
    """(values, result or None, errors, baseline inputs) for a query string; bad inputs fall back to their
    defaults, the key that caused each error named. ``explain=False``: the totals only, remembered
    (``estimate.totals_only``)."""
    raw, errors = _pairs(query)
    base_raw = {k[5:]: v for k, v in raw.items() if k.startswith("base.") and v != ""}
    raw = {k: v for k, v in raw.items() if v != "" and not k.startswith("base.")}
    values, parse_errors = parse(raw, strict=False)
    errors.update(parse_errors)
    if {"model", "config"} & set(parse_errors):
        values["name"] = None               # a name the link gave for a model it could not read
    if base_raw and values["compare"] == "off":
        values["compare"] = "baseline"
    given = [k for k in raw if k not in parse_errors]
    for _ in range(len(BY_KEY) + 1):
        try:
            result = estimate_values(values) if explain else totals_only(values)
            return values, result, errors, base_raw
        except FieldError as error:
            key = error.key if error.key in BY_KEY else "model"
            if error.fallback is not None and values[key] != error.fallback:
                # The input has a value that works with the others (the longest sequence a learned position
                # table embeds): estimate with it, the message saying why, the other inputs kept.
                errors[key] = f"{error}; estimated at {error.fallback:,}" if isinstance(error.fallback, int) \
                    else str(error)
                if fallbacks is not None:
                    fallbacks[key] = error.fallback       # the page says so instead of "using the default"
                values[key] = error.fallback
                continue
            if values[key] == DEFAULTS[key]:
                # The default fails only with another input: the latest input given is reset instead,
                # and the message stays under the key that describes the conflict.
                candidates = [k for k in reversed(given) if values[k] != DEFAULTS[k]]
                if not candidates:
                    errors[key] = str(error)
                    break
                errors.setdefault(candidates[0], f"{candidates[0]}: conflicts with the other inputs ({error})")
                values[candidates[0]] = DEFAULTS[candidates[0]]
                continue
            errors[key] = str(error)
            values[key] = DEFAULTS[key]
            if key in ("model", "config"):
                values["name"] = None       # the name was the refused model's: the default's is its own
    return values, None, errors, base_raw


def _answers(values: dict[str, Any], result: Estimate, base_raw: dict[str, Any], errors: dict[str, Any]) -> "Steps[dict[str, Any]]":
    answers = yield from answer_steps(values, result)
    answers["precision_default"] = yield from precision_default(values, result)
    answers["comparison"] = None
    if values["compare"] != "off":
        try:
            answers["comparison"] = yield from compare_steps(values, result, base_raw, answers)
        except FieldError as error:
            errors[error.key] = str(error)
    return answers


def _dumps(payload: dict[str, Any]) -> str:
    """JSON that JSON.parse accepts: no NaN or Infinity (a non-finite float becomes null)."""
    try:
        return json.dumps(payload, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(payload), allow_nan=False)


def _finite(value: object) -> object:
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def run(query: str, formulas: bool = True) -> str:
    """Estimate for a URL query string; returns JSON with result, breakdown, total, gpus, formulas, errors,
    warnings and the normalised query (see CONTRACT in the README's layout section).

    ``formulas=False`` leaves out the records' formulas (``answers`` carries them too): the page draws a
    keystroke's numbers within the frame, and the formulas table with the answers once typing pauses. The
    answers, which re-run the estimate many times, come from ``answers`` so typing stays fast.
    """
    fallbacks: dict[str, Any] = {}
    values, result, errors, _ = _estimate(query, fallbacks=fallbacks)
    payload: dict[str, Any] = {"errors": errors, "fallbacks": fallbacks, "query": to_query(values), "warnings": [],
                               "hub_offer": hub_offer(query, errors), "field_defaults": report.field_defaults(values)}
    if result is not None:
        total = result.total_bytes
        shown = report.result_json(result, formulas)
        payload.update(result=shown, breakdown=shown["breakdown"], summary=report.summary(result),
                       parallel_heading=report.parallel_heading(result, values),
                       total={"bytes": total, **format_bytes(total), "unit_note": report.UNIT_NOTE},
                       gpus=gpu_fits(total, values["gpu"], result.refused, values), warnings=list(result.warnings),
                       share=report.share(values, result))
        if formulas:
            payload["formulas"] = explain_formulas(result)
    ignored_keys = _ignored(values, query)
    payload["messages"] = report.message_kinds(payload["warnings"], ignored_keys)    # which are warnings, which notes
    payload["warnings"] += ignored_keys
    return _dumps(payload)


def headline(query: str) -> str:
    """What a keystroke's own frame shows: the total per GPU, its fit on the chosen GPU, and the inputs'
    errors; JSON shaped as ``run``'s payload with only those parts (``gpus`` holds the chosen GPU alone).
    The page asks ``run`` for everything else in the frame after, so a key is answered within a frame."""
    fallbacks: dict[str, Any] = {}
    values, result, errors, _ = _estimate(query, explain=False, fallbacks=fallbacks)
    payload: dict[str, Any] = {"errors": errors, "fallbacks": fallbacks, "hub_offer": hub_offer(query, errors)}
    if result is not None:
        total = result.total_bytes
        payload.update(result={"total_bytes": total, "peak_bytes": result.peak_bytes},
                       total={"bytes": total, **format_bytes(total)},
                       gpus=[gpu_fit(total, values["gpu"], values["gpu"], result.refused, sizes_itself(values))])
    return _dumps(payload)


def hub_offer(query: str, errors: "dict[str, Any]") -> "dict[str, str] | None":
    """When the model given is a hub id no preset has (refused under ``model``): {id, label} of the page's one
    click that fetches its config.json from the hub and imports it (the config.json import), the message under
    ``model`` then worded for the page (the command line's says config=PATH, which links never read); else None."""
    if "model" not in errors:
        return None
    raw, _ = _pairs(query)
    hub = hub_id(str(raw.get("model", "")))
    if hub is None or preset_id(hub) is not None:
        return None
    errors["model"] = (f"model: no preset has the hub id {hub!r}; its config.json gives its architecture, and until "
                       f"it is imported the results are the default model's ({DEFAULTS['model']})")
    return {"id": hub, "label": f"Fetch {hub}'s config.json from the Hugging Face hub and estimate it"}


def _ignored(values: dict[str, Any], query: str) -> "list[str]":
    """Messages for keys given that do not apply to the mode or method chosen (pycore.inputs.applies)."""
    given = [k for k, _ in parse_qsl(query[:MAX_QUERY].lstrip("?"))[:MAX_KEYS] if k in BY_KEY]
    return [describe(key, values) for key in ignored(values, list(dict.fromkeys(given)))]


def answers(query: str) -> str:
    """JSON with the answers (GPUs needed, plan, largest batch and sequence, cost, how to fit, comparison),
    the estimate's formulas (as ``run`` gives them) and any message about baseline inputs."""
    return finish(answers_steps(query))


def answers_steps(query: str) -> "Steps[str]":
    """``answers`` in steps (pycore/base/steps.py): the page makes them a few at a time while a person types.
    The estimate with its formulas and the JSON are steps of their own, a few milliseconds each."""
    yield
    values, result, errors, base_raw = _estimate(query)
    if result is None:
        return _dumps({"answers": None, "display": None, "comparison": None, "formulas": None, "styles": None,
                       "errors": errors})
    found = yield from _answers(values, result, base_raw, errors)
    yield
    formulas = explain_formulas(result)
    yield
    styles = report.chart_styles(result, found)
    return _dumps({"answers": found, "display": report.display_answers(result, found, host=True),
                   "comparison": report.display_comparison(found["comparison"]), "formulas": formulas,
                   "styles": styles, "errors": errors})


def csv(query: str) -> str:
    """The CSV download for a URL query string: the same bytes as ``python -m pycore --csv``."""
    values, result, errors, base_raw = _estimate(query)
    if result is None:
        return ""
    return report.to_csv(values, result, finish(_answers(values, result, base_raw, errors)))


def fits(query: str) -> str:
    """JSON rows of every preset's total per GPU for the query's workload on its ``gpus`` GPUs."""
    from pycore.answers.what_fits import what_fits
    values, _, errors, _ = _estimate(query)
    rows = [{**row, "size_text": report.fit_size_text(row)} for row in what_fits(values, values["gpus"] or 1)]
    return _dumps({"rows": rows, "gpus": values["gpus"] or 1,
                   "gpu": values["gpu"], "errors": errors})


def import_config(text: str, hub: str = "") -> str:
    """A pasted, uploaded or fetched config.json as schema inputs: its family's preset plus overrides. ``hub``:
    the hub id it was fetched by, which then names the model in the results (``name``)."""
    from pycore.model.config_import import import_config as convert
    out = convert(text)
    if hub_id(hub) and isinstance(out.get("query"), list):
        # a config the link carries (no preset expresses it) has the hub id in the model field too
        out["query"] = [[key, hub if key == "model" and out.get("carried") else value]
                        for key, value in out["query"] if key != "name"] + [["name", hub]]
    # Its sentences can quote the config's own text (a model_type): shown safely, as every echo is. The
    # query is the inputs themselves, parsed again by web.run.
    for key in ("message", "error"):
        if isinstance(out.get(key), str):
            out[key] = printable(out[key])
    out["warnings"] = [printable(str(w)) for w in out.get("warnings", ())]
    if isinstance(out.get("query"), list):
        named = dict(out["query"]).get("name") or hub_id(hub) or "imported config"
        out["choice"] = report.import_choice(out, printable(str(named), 100))     # the picker's recent imports
    return _dumps(out)


# --- launch settings, calibration (issue 30): the page's panel under the results --------------------------------

MAX_PASTE = 200_000         # characters of pasted launch settings read (a DeepSpeed JSON is a few hundred)
NO_RESULT = "No estimate for the inputs in the form (see the messages above)"


# The blocks a training setup gets, by the framework in the form: each launcher's own file, the Trainer's otherwise
LAUNCHERS = {"accelerate": ("accelerate", "trainer"), "deepspeed": ("deepspeed", "trainer"),
             "torchtitan": ("torchtitan",), "torchtune": ("torchtune",)}


def launch(query: str) -> str:
    """The launch settings of the setup in the form, as copyable blocks: JSON ``{"blocks": [{kind, title,
    follows, text}], "note", "errors"}``. Serving with vLLM gives its ``vllm serve`` line; training, a
    the launcher of the framework in the form (LAUNCHERS: TrainingArguments and DeepSpeed JSON for the Trainer and
    the others); serving with generate() none (``note`` says why)."""
    values, result, errors, _ = _estimate(query, explain=False)
    if result is None:
        return _dumps({"blocks": [], "note": NO_RESULT + ", so no launch settings.", "errors": errors})
    kinds: "tuple[str, ...]" = LAUNCHERS.get(values["framework"], ("trainer", "deepspeed")) \
        if values["mode"] == "train" else ("vllm",) if values["engine"] == "vllm" else ()
    blocks = [{"kind": kind, "title": export.FOLLOWS[kind][0], "follows": f"Names as in {export.FOLLOWS[kind][1]}",
               "text": export.export(kind, values, result)} for kind in kinds]
    note = "" if kinds else ("Serving with transformers' generate() (engine hf) is started from Python, with no "
                             "flags to copy; choose engine vllm for a vllm serve line.")
    if result.refused and values["mode"] == "infer":
        # the line is the setup in the form, as asked; it says that vLLM would stop at its start-up check
        note = f"This line starts nothing as it stands: {result.refused}."
    return _dumps({"blocks": blocks, "note": note, "errors": errors})


def launch_read(text: str) -> str:
    """Pasted launch settings (any block export.read takes, export_pytorch.NOT_A_BLOCK names them) as the inputs
    they set: JSON ``{"set": [[key, value]], "message"}``, or ``{"error"}``. A value the schema refuses is left out
    and named with the reason; the flags and keys no input takes are listed."""
    if len(text) > MAX_PASTE:
        return _dumps({"error": f"Pasted settings: {len(text):,} characters, over the {MAX_PASTE:,} read; paste "
                                "the vllm serve line or the JSON alone."})
    try:
        taken = export.read(text)
        others = export.unread(text)
    except FieldError as error:
        return _dumps({"error": f"Pasted settings: {error.message}."})
    _, refused = parse(taken, strict=False)
    kept = [[key, value] for key, value in taken.items() if key not in refused]
    words = [f"Took {plural(len(kept), 'setting')}: " + ", ".join(f"{key}={printable(value, 60)}"
                                                                   for key, value in kept) + "."]
    if refused:
        words.append("Refused: " + "; ".join(printable(str(message), 200) for message in refused.values()) + ".")
    if others:
        more = f" and {len(others) - 12:,} more" if len(others) > 12 else ""
        words.append("Not read (no input of this estimator takes them): "
                     + ", ".join(printable(str(key), 60) for key in others[:12]) + more + ".")
    return _dumps({"set": kept, "message": " ".join(words)})


def calibration(text: str, query: str) -> str:
    """A pasted vLLM log, PyTorch memory figures or nvidia-smi reading against the estimate of the form's inputs
    (pycore.answers.calibrate): JSON ``{"display"`` (pycore.output.calibration's strings), ``"overrides"``
    ([key, value] pairs that re-estimate to the measured figures), ``"apply_note"}``, or ``{"error"}``."""
    from pycore.answers.calibrate import calibrate
    from pycore.output.calibration import NO_OVERRIDE, display
    values, result, _, _ = _estimate(query, explain=False)
    if result is None:
        return _dumps({"error": NO_RESULT + ", so nothing to compare the figures with."})
    try:
        found = calibrate(values, text)
    except FieldError as error:
        return _dumps({"error": f"Pasted run figures: {printable(error.message, 2000)}."})
    overrides = [list(pair) for pair in found.overrides]
    note = (f"Apply sets {', '.join(key for key, _ in overrides)} in the form and the link: "
            f"{display(found)['overrides']}.") if overrides else NO_OVERRIDE
    return _dumps({"display": display(found), "overrides": overrides, "apply_note": note,
                   "unit_note": "GiB = 2^30 bytes. The text was read in this page and sent nowhere."})


# --- a checkpoint's headers, read from local files by the page (issue 30) ---------------------------------------

def header_need(name: str, size: int, data: bytes) -> int:
    """How many bytes from the start of the file ``name`` (``size`` bytes in all) the page must read for its header,
    given the first bytes it has read (``data``): 0 once they hold the header, or when the file is refused
    (``header_summary`` then says why). The page slices the file (or asks the hub for a range) to that length
    and asks again. ``size`` < 0: not known yet (the hub's first answer gives it)."""
    from pycore.model.checkpoint import GGUF_FIRST_READ, MAX_HEADER, Truncated, read_gguf, safetensors_length
    if size < 0:
        size = 2**62
    if name.endswith(".json"):
        return size if len(data) < size <= MAX_HEADER else 0
    if len(data) < min(8, size):
        return min(8, size)
    try:
        if data[:4] == b"GGUF":
            if len(data) == 8 < size:           # a file of 8 bytes has nothing more to read (the fuzz test's find)
                return min(size, GGUF_FIRST_READ)
            read_gguf(data, name, size if size < 2**62 else None)
            return 0
        need = 8 + safetensors_length(data[:8])
    except Truncated as short:
        more = min(size, MAX_HEADER, max(short.needed, 2 * len(data)))
        return more if more > len(data) else 0
    except FieldError:
        return 0
    return need if len(data) < need <= size else 0


def header_shards(index: bytes) -> str:
    """The shard files a model.safetensors.index.json names, in order (the page then reads each one's header from
    the hub): JSON ``{"shards": [...]}`` or ``{"error"}`` naming what is wrong."""
    from pycore.model.checkpoint import read_index
    try:
        weight_map, _ = read_index(index)
    except FieldError as error:
        return _dumps({"error": f"Checkpoint: model.safetensors.index.json: {printable(error.message, 400)}."})
    return _dumps({"shards": list(dict.fromkeys(weight_map.values()))})


def _checkpoint_files(files: "list[tuple[str, int, bytes]]") -> "Checkpoint":
    """The Checkpoint of the files' header bytes: an index with its shards, else the .safetensors files, else the
    .gguf ones (as ``python -m pycore header=FOLDER``)."""
    from pycore.model import checkpoint as ckpt
    by_name = {name: (size, data) for name, size, data in files}
    index = [name for name in by_name if name.endswith(".json")]
    if index:
        size, data = by_name[index[0]]
        weight_map, total = ckpt.read_index(bytes(data))
        shards = list(dict.fromkeys(weight_map.values()))
        missing = [shard for shard in shards if shard not in by_name]
        if missing:
            raise FieldError("header", f"the index names {printable(missing[0], 80)!r}, which was not chosen with it"
                             + (f" ({len(missing)} shards missing)" if len(missing) > 1 else ""))
        return ckpt.combine([_read_one(ckpt.read_safetensors, shard, *by_name[shard]) for shard in shards],
                            weight_map, total)
    for suffix, reader in ((".safetensors", ckpt.read_safetensors), (".gguf", ckpt.read_gguf)):
        chosen = sorted(name for name in by_name if name.endswith(suffix))
        if chosen:
            return ckpt.combine([_read_one(reader, name, *by_name[name]) for name in chosen])
    raise FieldError("header", "no .safetensors, .gguf or model.safetensors.index.json file among those chosen")


def _read_one(reader: "Callable[[bytes, str, int | None], Checkpoint]", name: str, size: int,
              data: bytes) -> "Checkpoint":
    """One file's Checkpoint (``size`` < 0: not known, so not checked); a refusal names the file."""
    try:
        return reader(data, name, size if size >= 0 else None)
    except FieldError as error:
        if name in error.message:
            raise
        raise FieldError("header", f"{printable(name, 80)}: {error.message}") from None


def header_summary(files: "list[tuple[str, int, bytes]]", origin: str = "") -> str:
    """The weights' exact bytes from the header bytes the page read of each chosen file ((name, size, first
    bytes); ``origin``: the hub id they came from, which then names them): JSON ``{"rows": [{label, bytes,
    text}]`` by pool then dtype, ``"message"``, ``"notes"``, ``"set"`` (weight_bytes and weight_files for the
    form)``}``, or ``{"error"}`` naming what is wrong."""
    from pycore.output.cli import POOL_LABELS
    try:
        found = _checkpoint_files(files)
    except FieldError as error:
        return _dumps({"error": f"Checkpoint: {printable(error.message, 400)}."})
    names = [printable(name, 80) for name in found.files]
    named = names[0] if len(names) == 1 else f"{len(names)} files, {names[0]} ... {names[-1]}"
    if origin:
        named = f"{printable(origin, 100)}: {named}"
    rows = [{"label": POOL_LABELS.get(pool, pool), "bytes": f"{size:,}", "text": f"{size / GIB:,.3f} GiB"}
            for pool, size in found.by_pool.items()]
    rows += [{"label": f"stored as {printable(dtype, 20)}", "bytes": f"{size:,}", "text": f"{size / GIB:,.3f} GiB"}
             for dtype, size in found.by_dtype.items()]
    message = (f"{named} ({found.format}): {len(found.tensors):,} tensors, {found.total_bytes:,} bytes = "
               f"{found.total_bytes / GIB:,.3f} GiB of weights (GiB = 2^30 bytes), from {found.header_bytes:,} header "
               "bytes read. The estimate now takes these bytes for the weights (weight_bytes).")
    chosen, read = _gguf_model(found)
    return _dumps({"rows": rows, "message": message + read, "notes": [printable(n, 300) for n in found.notes],
                   "set": [*chosen, ["weight_bytes", str(found.total_bytes)], ["weight_files", named[:200]]]})


def _gguf_model(found: "Checkpoint") -> "tuple[list[list[str]], str]":
    """A GGUF file's architecture from its metadata, as the config import expresses a config.json (the model and its
    overrides), and a sentence on it; nothing for a safetensors checkpoint (its config.json says it)."""
    from pycore.model import checkpoint as ckpt
    from pycore.model.config_import import import_config
    config = ckpt.gguf_config(found)
    if config is None:
        kind = found.architecture.get("architecture")
        return [], (f" Its architecture ({printable(str(kind), 40)}) is not read from GGUF metadata: the model in "
                    "the form is estimated with these weights." if found.format == "gguf" and kind else "")
    answer = import_config(json.dumps(config))
    if "error" in answer:
        return [], f" Its GGUF metadata was not read as a model: {printable(answer['error'], 200)}"
    return [[key, value] for key, value in answer["query"]], f" Model read from its GGUF metadata: {answer['message']}"
