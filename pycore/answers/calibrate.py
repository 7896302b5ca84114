"""Calibration from a real run (issue 30): the figures a pasted log states, beside the estimate of the same setup,
and the differences the schema has keys for turned into overrides that reproduce them.

``read(text)`` finds what it recognises — each pattern below is cited to the code that prints it, with the
version checked — and refuses text with none of them (FieldError naming what it expected). ``calibrate(values,
text)`` compares each figure with the estimate of ``values`` and, where a schema key can carry the difference,
gives the override; re-estimating with them gives the measured figure (``Calibration.checks`` says so, figure by
figure). The text is only read here: nothing is stored or sent anywhere.

Numbers only: the words and the table are pycore.output.calibration's.
"""

import re
from dataclasses import asdict, dataclass
from typing import Any, Iterator

from pycore.base.errors import FieldError
from pycore.base.units import GIB, printable
from pycore.inputs.schema import BY_KEY, MOST_BYTES, Values
from pycore.memory.estimate import Estimate, estimate_values
from pycore.model.catalog import gpus as gpu_catalog

MAX_CHARS = 4_000_000       # a start-up log is tens of kB; a serving log with its request lines a few MB
MAX_LINE = 2_000            # a longer line is read up to here (every figure sits near a line's start)
MAX_LINES = 200_000

# Where each figure is printed, with the version the pattern was checked against.
SOURCES = {
    "vllm_v1_load": "vLLM V1 vllm/v1/worker/gpu_model_runner.py load_model: \"Model loading took %.4f GiB and %.6f "
                    "seconds\" (v0.8; \"took 14.99 GiB memory and\" in v0.15.1)",
    "vllm_v0_load": "vLLM V0 vllm/worker/model_runner.py load_model: \"Loading model weights took %.4f GB\" "
                    "(v0.5-v0.10; bytes / 2^30, GiB whatever the label)",
    "vllm_v0_profile": "vLLM V0 vllm/worker/worker.py determine_num_available_blocks (v0.6.6-v0.10, as PR 12126 "
                       "prints it): \"the current vLLM instance can use total_gpu_memory (X GiB) x "
                       "gpu_memory_utilization (Y) = Z GiB\", \"model weights take X GiB; non_torch_memory takes X "
                       "GiB; PyTorch activation peak memory takes X GiB; the rest of the memory reserved for KV Cache "
                       "is X GiB\"; the same figures as v0.6.4's one line \"Memory profiling results: "
                       "total_gpu_memory=... non_torch_memory=... kv_cache_size=... gpu_memory_utilization=...\" and "
                       "PR 10511's table",
    "vllm_v1_available": "vLLM V1 vllm/v1/worker/gpu_worker.py determine_available_memory: \"Available KV cache "
                         "memory: %.2f GiB\" (requested memory less the profiling run's non-KV memory; "
                         "vllm-project/vllm commit 35d5cda1)",
    "vllm_kv_report": "vLLM V1 vllm/v1/core/kv_cache_utils.py _report_kv_cache_config: \"GPU KV cache size: %s "
                      "tokens\" and \"Maximum concurrency for %s tokens per request: %.2fx\" (commit 001cabc1; "
                      "since v0.7.3, PR 13596)",
    "vllm_blocks": "vLLM V0 vllm/executor/executor_base.py initialize_cache: \"# %s blocks: %d, # CPU blocks: %d\" "
                   "(CUDA; GPU before v0.6.6), blocks of 16 tokens by default",
    "vllm_graphs": "vLLM V1 vllm/v1/worker/gpu_model_runner.py capture_model: \"Graph capturing finished in %.0f "
                   "secs, took %.2f GiB\"",
    "torch_summary": "torch.cuda.memory_summary() (torch/cuda/memory.py, pytorch/pytorch commit 00b65a04): the "
                     "\"Allocated memory\" and \"GPU reserved memory\" rows, Cur Usage and Peak Usage, each floored "
                     "to a whole B, KiB, MiB or GiB (KB, MB, GB in older releases, also 1024-based)",
    "torch_plain": "a printed torch.cuda.max_memory_allocated() / max_memory_reserved() (bytes), or a \"peak "
                   "allocated\" / \"peak reserved\" line with its unit (GiB, MiB: 2^30, 2^20; GB, MB: 10^9, 10^6)",
    "smi_table": "nvidia-smi's table: each GPU's Memory-Usage cell \"USED MiB / TOTAL MiB\"",
    "smi_csv": "nvidia-smi --query-gpu=memory.used,memory.total --format=csv: the header \"memory.used [MiB]\", "
               "then one \"N MiB\" row per GPU",
    "pynvml": "transformers docs, model_memory_anatomy.md print_gpu_utilization(): \"GPU memory occupied: N MB.\" "
              "(pynvml's used // 1024**2: MiB)",
}

EXPECTED = ("no figure recognised; expected a vLLM start-up log (\"Model loading took X GiB\", \"Available KV cache "
            "memory: X GiB\", \"GPU KV cache size: N tokens\", or \"model weights take X GiB; non_torch_memory takes "
            "...\"), torch.cuda.memory_summary()'s table, a line such as \"max_memory_allocated: 123456789\" or "
            "\"Peak allocated 12.3 GiB\", or nvidia-smi's \"USED MiB / TOTAL MiB\" reading or --query-gpu=memory.used "
            "--format=csv output")

_N = r"(-?\d[\d,]{0,24}(?:\.\d{1,12})?)"
_UNITS = {"B": 1, "bytes": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4,
          "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
_SUMMARY_UNITS = {"B": 1, "KB": 2**10, "MB": 2**20, "GB": 2**30, "TB": 2**40, "PB": 2**50,
                  "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50}

# (figure, pattern with the number as its last group, bytes per printed unit (1: a count), source)
_FIXED: "tuple[tuple[str, re.Pattern[str], int, str], ...]" = tuple(
    (figure, re.compile(pattern), unit, source) for figure, pattern, unit, source in (
        ("weights", r"Model loading took\s+" + _N + r"\s*GiB", GIB, "vllm_v1_load"),
        ("weights", r"Loading model weights took\s+" + _N + r"\s*GB", GIB, "vllm_v0_load"),
        ("weights", r"model weights take\s+" + _N + r"\s*GiB", GIB, "vllm_v0_profile"),
        ("non_torch", r"non_torch_memory(?:\s+takes\s+|\s*=\s*|\s+)" + _N + r"\s*GiB", GIB, "vllm_v0_profile"),
        ("activation_peak", r"PyTorch activation peak memory(?:\s+takes)?\s+" + _N + r"\s*GiB", GIB,
         "vllm_v0_profile"),
        ("kv_cache", r"reserved for KV Cache is\s+" + _N + r"\s*GiB", GIB, "vllm_v0_profile"),
        ("kv_cache", r"(?:kv_cache_size\s*=\s*|available_kv_cache_memory\s+)" + _N + r"\s*GiB", GIB, "vllm_v0_profile"),
        ("kv_cache", r"Available KV cache memory:\s*" + _N + r"\s*GiB", GIB, "vllm_v1_available"),
        ("total_gpu_memory", r"total_gpu_memory(?:\s*\(\s*|\s*=\s*|\s+)" + _N + r"\s*GiB", GIB, "vllm_v0_profile"),
        ("gpu_util", r"gpu_memory_utilization(?:\s*\(\s*|\s*=\s*|\s+)(\d(?:\.\d{1,6})?)(?![\d.])", 1, "vllm_v0_profile"),
        ("requested", r"gpu_memory_utilization\s*\(\s*[\d.]{1,10}\s*\)\s*=\s*" + _N + r"\s*GiB", GIB, "vllm_v0_profile"),
        ("requested", r"the current vLLM instance can use\s+" + _N + r"\s*GiB", GIB, "vllm_v0_profile"),
        ("kv_tokens", r"GPU KV cache size:\s*" + _N + r"\s*tokens", 1, "vllm_kv_report"),
        ("max_model_len", r"Maximum concurrency for\s*" + _N + r"\s*tokens per request", 1, "vllm_kv_report"),
        ("concurrency", r"tokens per request:\s*" + _N + r"\s*x", 1, "vllm_kv_report"),
        ("kv_blocks", r"(?:GPU|CUDA) blocks:\s*" + _N, 1, "vllm_blocks"),
        ("cuda_graphs", r"Graph capturing finished in\s+[\d.]{1,12}\s*secs?,\s*took\s+" + _N + r"\s*GiB", GIB,
         "vllm_graphs"),
        ("smi_used", r"GPU memory occupied:\s*" + _N + r"\s*MB", 2**20, "pynvml"),
    ))
_SUMMARY = re.compile(r"^\|\s*(Allocated memory|GPU reserved memory)\s*\|\s*(\d{1,20})\s*([KMGTP]?i?B)\s*\|"
                      r"\s*(\d{1,20})\s*([KMGTP]?i?B)\s*\|")
_PLAIN = re.compile(r"(max_memory_allocated|max_memory_reserved|memory_allocated|memory_reserved|"
                    r"[Pp]eak (?:memory )?(?:allocated|allocation|alloc|reserved))(?:\(\))?\s*(?:[:=]\s*)?" + _N +
                    r"(?:\s*(GiB|MiB|KiB|TiB|GB|MB|KB|TB|bytes|B)\b)?")
_SMI = re.compile(r"\|\s*(\d{1,9})MiB\s*/\s*(\d{1,9})MiB\s*\|([^|]{0,80})\|")
_CSV_HEADER = re.compile(r"memory\.(?:used|total) \[MiB\]")
_CSV_CELL = re.compile(r"\s*(\d{1,9}) MiB\s*")
_MARKS = ("took", "take", "memory", "KV", "blocks", "GiB", "MiB", "MB", "allocat", "reserved", "concurrency")
BYTES_FIGURES = frozenset({"weights", "non_torch", "activation_peak", "kv_cache", "total_gpu_memory", "requested",
                           "cuda_graphs", "allocated", "peak_allocated", "reserved", "peak_reserved", "smi_used",
                           "smi_total", "allocator_cache", "outside", "context"})
LARGEST = frozenset({"smi_used", "smi_total"})     # several GPUs: the most loaded one, as the estimate is


@dataclass(frozen=True)
class Reading:
    """One figure the text states: its value (bytes, or a count or ratio), where, and the code that prints it."""

    figure: str
    value: float
    line: int                   # 1-based line of the text
    excerpt: str                # that line, printable, at most 160 characters
    source: str                 # a key of SOURCES
    resolution: float           # how far the printed figure can be from the true one (its rounding), same unit


@dataclass(frozen=True)
class Row:
    """Measured against estimated for one component; ``key`` is the schema key an override of it goes to
    ("" when none), ``proposed`` the key it would need (none in the schema yet)."""

    figure: str
    measured: float
    estimated: "float | None"   # the estimate of the setup as given
    calibrated: "float | None"  # re-estimated with the overrides
    source: str                 # a key of SOURCES, or "derived" (a difference of two measured figures)
    key: str = ""
    proposed: str = ""
    off: bool = False           # still off after the overrides by more than the printed figure's rounding


@dataclass(frozen=True)
class Check:
    """A measured figure and the same figure re-estimated with the overrides."""

    figure: str
    measured: float
    calibrated: float


@dataclass(frozen=True)
class Calibration:
    readings: "tuple[Reading, ...]"
    rows: "tuple[Row, ...]"
    overrides: "tuple[tuple[str, str], ...]"   # (schema key, value as the schema reads it), in order
    checks: "tuple[Check, ...]"
    notes: "tuple[tuple[str, dict[str, Any]], ...]"   # (what, its numbers): worded by pycore.output.calibration
    setup: "dict[str, Any]"     # engine, mode, gpu of the estimate compared with

    def as_dict(self) -> "dict[str, Any]":
        return {"readings": [asdict(r) for r in self.readings], "rows": [asdict(r) for r in self.rows],
                "overrides": dict(self.overrides), "checks": [asdict(c) for c in self.checks],
                "notes": [{"what": what, **data} for what, data in self.notes], "setup": self.setup,
                "sources": {key: SOURCES[key] for key in sorted({r.source for r in self.readings})}}


# ---- reading the text -------------------------------------------------------------------------------------------

def read(text: str) -> "tuple[Reading, ...]":
    """Every figure ``text`` states, in order; FieldError ("calibrate") if it is too long or states none."""
    if not isinstance(text, str):
        raise FieldError("calibrate", "expected text")
    if len(text) > MAX_CHARS:
        raise FieldError("calibrate", f"{len(text):,} characters; at most {MAX_CHARS:,} are read (paste the start-up "
                                      "lines and the memory readings)")
    found = list(_readings(text.splitlines()[:MAX_LINES]))
    if not found:
        raise FieldError("calibrate", EXPECTED)
    return tuple(found)


def _readings(lines: "list[str]") -> Iterator[Reading]:
    csv_columns: "dict[str, int] | None" = None
    for index, whole in enumerate(lines, 1):
        line = whole[:MAX_LINE]
        if csv_columns is not None:
            row = list(_csv_row(line, csv_columns, index))
            if row:
                yield from row
                continue
            csv_columns = None
        if _CSV_HEADER.search(line):
            csv_columns = {name.strip().split(" ")[0]: i for i, name in enumerate(line.split(","))}
            continue
        if any(mark in line for mark in _MARKS):
            yield from _line_readings(line, index)


def _line_readings(line: str, index: int) -> Iterator[Reading]:
    for figure, pattern, unit, source in _FIXED:
        match = pattern.search(line)
        if match:
            reading = _reading(figure, match.group(match.lastindex or 1), unit, line, index, source)
            if reading:
                yield reading
    summary = _SUMMARY.search(line)
    if summary:
        name = "allocated" if summary.group(1) == "Allocated memory" else "reserved"
        for figure, number, label in ((name, summary.group(2), summary.group(3)),
                                      ("peak_" + name, summary.group(4), summary.group(5))):
            if label in _SUMMARY_UNITS:
                yield Reading(figure, int(number) * _SUMMARY_UNITS[label], index, _excerpt(line), "torch_summary",
                              _SUMMARY_UNITS[label])
    yield from _plain(line, index)
    smi = _SMI.search(line)
    if smi and smi.group(3).strip():     # a GPU's row (a BAR1 row has nothing in its next cell)
        for figure, number in (("smi_used", smi.group(1)), ("smi_total", smi.group(2))):
            yield Reading(figure, int(number) * 2**20, index, _excerpt(line), "smi_table", 2**20 / 2)


def _plain(line: str, index: int) -> Iterator[Reading]:
    match = _PLAIN.search(line)
    if not match:
        return
    name, number, unit = match.group(1).lower(), match.group(2), match.group(3)
    if unit is None and ("." in number or "," in number):
        return                          # a bare number is bytes: a whole one
    figure = ("peak_" if name.startswith(("max", "peak")) else "") + \
        ("reserved" if "reserved" in name else "allocated")
    reading = _reading(figure, number, _UNITS[unit or "B"], line, index, "torch_plain")
    if reading:
        yield reading


def _csv_row(line: str, columns: "dict[str, int]", index: int) -> Iterator[Reading]:
    cells = line.split(",")
    for figure, column in (("smi_used", "memory.used"), ("smi_total", "memory.total")):
        at = columns.get(column)
        if at is not None and at < len(cells):
            match = _CSV_CELL.fullmatch(cells[at])
            if match:
                yield Reading(figure, int(match.group(1)) * 2**20, index, _excerpt(line), "smi_csv", 2**20 / 2)


def _reading(figure: str, number: str, unit: int, line: str, index: int, source: str) -> "Reading | None":
    """The reading of ``number`` (commas as thousands separators) in ``unit``; None when out of any plausible range."""
    text = number.replace(",", "")
    try:
        value = float(text)
    except ValueError:
        return None
    decimals = len(text.split(".")[1]) if "." in text else 0
    if figure in BYTES_FIGURES:
        value = round(value * unit)
        if abs(value) > MOST_BYTES:
            return None
    elif not 0 <= value <= 10**12:
        return None
    return Reading(figure, value, index, _excerpt(line), source, unit * 10.0**-decimals / 2 if decimals else
                   (unit / 2 if unit > 1 else 0.0))


def _excerpt(line: str) -> str:
    return printable(line.strip(), 160)


def figures(readings: "tuple[Reading, ...]") -> "dict[str, Reading]":
    """One reading per figure: the last one stated, but the largest of the GPUs' nvidia-smi readings."""
    out: "dict[str, Reading]" = {}
    for reading in readings:
        before = out.get(reading.figure)
        if before is None or reading.figure not in LARGEST or reading.value >= before.value:
            out[reading.figure] = reading
    return out


# ---- measured against estimated -----------------------------------------------------------------------------------

VLLM_FIGURES = frozenset({"non_torch", "activation_peak", "total_gpu_memory", "gpu_util", "requested", "kv_tokens",
                          "max_model_len", "concurrency", "kv_blocks", "cuda_graphs"})
# A figure whose difference the schema has no key for: the key it would need (pycore/inputs/schema.py).
# (After the overrides, a figure still off by more than its printed rounding names the key it would take.)
PROPOSED = {"weights": "weight_bytes", "non_torch": "vllm_non_torch", "activation_peak": "vllm_activation_peak",
            "total_gpu_memory": "gpu_memory", "peak_reserved": "allocator_cache", "allocator_cache": "allocator_cache",
            "context": "cuda_context"}
LUMPED = ("peak_reserved", "allocator_cache", "context")
ORDER = ("total_gpu_memory", "gpu_util", "requested", "weights", "non_torch", "activation_peak", "kv_cache",
         "kv_blocks", "kv_tokens", "max_model_len", "concurrency", "cuda_graphs", "allocated", "reserved",
         "peak_allocated", "peak_reserved", "allocator_cache", "context", "outside", "smi_used", "smi_total")


def _vllm(values: Values) -> bool:
    return bool(values["mode"] == "infer" and values["engine"] == "vllm")


def estimated_figures(values: Values, est: Estimate) -> "dict[str, float]":
    """The estimate's value of every figure a log can state, for this setup (vLLM's only with engine=vllm)."""
    comps = est.components
    gpu = gpu_catalog().get(values["gpu"], {})
    usable = gpu.get("usable_bytes", 0)
    out: "dict[str, float]" = {
        "weights": comps.get("weights", 0) + comps.get("mtp_weights", 0) + comps.get("draft_weights", 0), "peak_allocated": est.peak_bytes,
        "peak_reserved": est.reserved_bytes, "smi_used": est.total_bytes, "smi_total": usable,
        "allocator_cache": est.reserved_bytes - est.peak_bytes}
    if "kv_cache" in comps:
        out["kv_cache"] = comps["kv_cache"]
    if _vllm(values) and est.vllm:
        out.update(non_torch=comps.get("non_torch", 0), activation_peak=comps.get("profile_activations", 0),
                   total_gpu_memory=usable, gpu_util=values["gpu_util"], requested=int(usable * values["gpu_util"]),
                   kv_tokens=est.vllm["kv_cache_tokens"], kv_blocks=est.vllm["kv_cache_blocks"],
                   max_model_len=est.vllm["context"], concurrency=round(est.vllm["max_concurrency"], 2),
                   outside=est.total_bytes - est.peak_bytes)
    else:
        out["context"] = est.total_bytes - est.reserved_bytes
    return out


def _vllm_budget(have: "dict[str, float]") -> "float | None":
    """What vLLM's own memory comes to, as its log states it: the requested budget, or its four parts."""
    if "requested" in have:
        return have["requested"]
    if "total_gpu_memory" in have and "gpu_util" in have:
        return round(have["total_gpu_memory"] * have["gpu_util"])
    parts = ("weights", "non_torch", "activation_peak", "kv_cache")
    return sum(have[p] for p in parts) if all(p in have for p in parts) else None


def calibrate(values: Values, text: str) -> Calibration:
    """The figures ``text`` states against the estimate of ``values``, the overrides that carry the differences
    the schema has keys for, and each targeted figure re-estimated with them."""
    readings = read(text)
    found = figures(readings)
    est = estimate_values(values)
    plan = _Plan(values, est, {figure: reading.value for figure, reading in found.items()})
    plan.run()
    new_values = apply(values, plan.overrides)
    new_est = estimate_values(new_values) if plan.overrides else est
    ours, after = estimated_figures(values, est), estimated_figures(new_values, new_est)
    measured = {figure: (reading.value, reading.source) for figure, reading in found.items()}
    measured.update({figure: (value, "derived") for figure, value in plan.derived.items()})
    # overhead is one figure for the allocator's cache and the CUDA context: once it is set, the estimate no longer
    # splits them, and max_memory_reserved holds a share of that one figure: none of the three is re-estimated alone
    lumped = LUMPED if "overhead" in plan.overrides and not _vllm(values) else ()
    table = []
    for figure in ORDER:
        if figure in measured:
            value, source = measured[figure]
            key = "overhead" if figure in lumped else plan.used.get(figure, "")
            left = None if figure in lumped else after.get(figure)
            differs = left is not None and abs(value - left) > _resolution(found, figure)
            table.append(Row(figure, value, ours.get(figure), left, source, key,
                             PROPOSED.get(figure, "") if differs else "", differs))
    checks = tuple(Check(figure, target, after[figure]) for figure, target in plan.targets if figure in after)
    return Calibration(readings, tuple(table), tuple(plan.overrides.items()), checks, tuple(plan.notes),
                       {"mode": values["mode"], "engine": values["engine"] if values["mode"] == "infer" else None,
                        "gpu": values["gpu"]})


def _resolution(found: "dict[str, Reading]", figure: str) -> float:
    reading = found.get(figure)
    return reading.resolution if reading else 0.0


def apply(values: Values, overrides: "dict[str, str]") -> Values:
    """``values`` with the overrides read as the schema reads them (FieldError naming a key it refuses)."""
    out = dict(values)
    for key, text in overrides.items():
        out[key] = BY_KEY[key].parse(text)
    return out


class _Plan:
    """Which differences go to which schema key: the overrides, the figure each came from, the figures they
    should reproduce, and what could not be attributed (notes)."""

    def __init__(self, values: Values, est: Estimate, have: "dict[str, float]") -> None:
        self.values, self.est, self.have = values, est, have
        self.derived = _derived_values(values, have)
        self.overrides: "dict[str, str]" = {}
        self.used: "dict[str, str]" = {}
        self.targets: "list[tuple[str, float]]" = []
        self.notes: "list[tuple[str, dict[str, Any]]]" = []

    def run(self) -> None:
        if any(figure in VLLM_FIGURES for figure in self.have) and not _vllm(self.values):
            self.notes.append(("not_vllm", {}))
        if _vllm(self.values):
            self._vllm_settings()
            self._vllm_outside()
        else:
            peak = self.have.get("peak_allocated")
            new_peak = None
            if peak is not None and self.values["mode"] == "train" and peak != self.est.peak_bytes:
                new_peak = self._activations(peak)
            self._overhead(peak, new_peak)

    def _set(self, key: str, text: str, figure: str, target: "float | None" = None) -> None:
        self.overrides[key] = text
        self.used[figure] = key
        if target is not None:
            self.targets.append((figure, target))

    def _vllm_settings(self) -> None:
        util = self.have.get("gpu_util")
        if util is not None and 0.05 <= util <= 1 and abs(util - self.values["gpu_util"]) > 1e-9:
            self._set("gpu_util", f"{util:g}", "gpu_util", util)
        length = self.have.get("max_model_len")
        context = (self.est.vllm or {}).get("context")
        if length is not None and context is not None and length != context:
            self.notes.append(("max_model_len", {"log": int(length), "setup": context}))
        # Not the weights: weight_bytes is a checkpoint's exact bytes for the whole model (its headers), and the
        # log's figure one GPU's, rounded to 0.01 GiB; the row points at the headers instead (output.calibration).
        for figure in ("non_torch", "activation_peak", "total_gpu_memory"):
            key = PROPOSED[figure]
            if figure in self.have and key in BY_KEY:      # a key added to the schema later is used at once
                self._set(key, str(int(self.have[figure])), figure)

    def _vllm_outside(self) -> None:
        outside = self.derived.get("outside")
        if outside is None:
            if "smi_used" in self.have:
                self.notes.append(("no_budget", {}))
            return
        if outside < 0:
            self.notes.append(("negative", {"figure": "outside", "bytes": outside}))
            return
        self._set("overhead", str(int(outside)), "outside", outside)

    def _activations(self, peak: float) -> "int | None":
        """act_per_sample (activations=per-sample) giving the measured peak; the new peak, or None."""
        found = solve_activations(self.values, int(peak))
        if found is None:
            self.notes.append(("activations_not_attributable", {"peak": peak}))
            return None
        per_sample, new_peak = found
        if self.values["activations"] != "per-sample":
            self.notes.append(("per_sample_seq", {"seq": self.values["seq"]}))
        self._set("activations", "per-sample", "activations")
        self._set("act_per_sample", str(per_sample), "peak_allocated", peak)
        if new_peak != peak:
            self.notes.append(("per_sample_rounding", {"bytes": int(peak - new_peak), "batch": self.values["batch"]}))
        return new_peak

    def _overhead(self, peak: "float | None", new_peak: "int | None") -> None:
        """overhead from nvidia-smi less the peak (exact total), or from the allocator's cache and the estimated
        context when only PyTorch's figures are given."""
        smi, reserved = self.have.get("smi_used"), self.have.get("peak_reserved")
        if peak is None:
            if smi is not None or reserved is not None:
                self.notes.append(("no_split", {}))
            return
        if smi is not None:
            base = new_peak if new_peak is not None else peak
            if smi < base:
                self.notes.append(("negative", {"figure": "smi_used", "bytes": smi - base}))
                return
            self._set("overhead", str(int(smi - base)), "smi_used", smi if new_peak is not None else None)
            for figure in ("context", "allocator_cache"):
                if figure in self.derived:
                    self.used[figure] = "overhead"
        elif reserved is not None and reserved < peak:
            self.notes.append(("negative", {"figure": "allocator_cache", "bytes": reserved - peak}))
        elif reserved is not None:
            context = self.est.total_bytes - self.est.reserved_bytes
            self._set("overhead", str(int(reserved - peak + context)), "allocator_cache")
            self.notes.append(("reserved_only", {"context": context}))


def _derived_values(values: Values, have: "dict[str, float]") -> "dict[str, float]":
    out: "dict[str, float]" = {}
    if "peak_reserved" in have and "peak_allocated" in have:
        out["allocator_cache"] = have["peak_reserved"] - have["peak_allocated"]
    if _vllm(values) and "smi_used" in have:
        budget = _vllm_budget(have)
        if budget is not None:
            out["outside"] = have["smi_used"] - budget
    elif "smi_used" in have and "peak_reserved" in have:
        out["context"] = have["smi_used"] - have["peak_reserved"]
    return out


def solve_activations(values: Values, target: int) -> "tuple[int, int] | None":
    """The largest act_per_sample (activations=per-sample) whose estimated peak is at most ``target``, and that
    peak; None when the rest of the estimate alone is over it or activations do not reach the peak.

    The peak is the largest moment, each moment linear in act_per_sample (the saved activations are live in
    some): the first moment to reach the target gives the value, then the nearest whole bytes are tried."""
    base = {**values, "activations": "per-sample", "act_per_sample": 0}
    try:
        low = estimate_values(base, explain=False)
        if low.peak_bytes > target:
            return None
        probe = estimate_values({**base, "act_per_sample": GIB}, explain=False)
        slopes = {m: (probe.moments[m] - low.moments[m]) / GIB for m in low.moments}
        guesses = [(target - low.moments[m]) / s for m, s in slopes.items() if s > 0]
        if not guesses:
            return None
        first = int(min(guesses))
        best = None
        for candidate in (first - 1, first, first + 1):
            if 0 <= candidate <= MOST_BYTES:
                peak = estimate_values({**base, "act_per_sample": candidate}, explain=False).peak_bytes
                if peak <= target:
                    best = (candidate, peak)
        return best
    except FieldError:
        return None
