"""The estimator: inputs in, bytes per GPU out, every byte in a record that explains itself.

``estimate(inputs)`` parses the inputs (pycore.inputs.schema), resolves them into a typed Setup (pycore.memory.setup),
builds the memory pools of the worst GPU (pycore.memory.training or pycore.memory.serving; model states in
pycore.memory.model_states, activations in pycore.memory.activations), and sums the pools live at each moment. The
peak is the largest moment, what ``torch.cuda.max_memory_allocated()`` reports; the breakdown is the
pools live at that moment plus the runtime overhead, and adds up to the total exactly.
"""

from functools import lru_cache

from pycore.base.errors import FieldError, InputError
from pycore.base.expr import rnd, split, sym
from pycore.base.units import format_bytes
from pycore.inputs.schema import parse
from pycore.memory.device import overhead_pools
from pycore.memory.pools import Pool, components, live, stage_components
from pycore.memory.precision import named_policy
from pycore.memory.serving import kv_cache_bytes, serving, vllm_capacity
from pycore.memory.setup import Setup, quantization_of, resolve, resolve_architecture
from pycore.memory.training import training
from pycore.model.catalog import gpus as gpu_catalog

__all__ = ["estimate", "estimate_values", "estimate_setup", "kv_cache_bytes", "quantization_of",
           "resolve_architecture", "FieldError", "InputError"]


def estimate(inputs: dict) -> dict:
    """Estimate memory per GPU.

    Args:
        inputs: key -> string mapping in the schema (pycore/inputs/schema.py).
    Returns:
        A plain dict (JSON-ready): params, pools, moments, phases, peak_bytes, overhead_bytes, total_bytes,
        breakdown (the records live at the peak plus the overhead, summing to total_bytes), components.
    Raises:
        FieldError naming the key when an input is not acceptable.
    """
    return estimate_values(parse(inputs))


def estimate_values(values: dict, explain: bool = True, formulas: bool = True) -> dict:
    """``estimate`` for values already parsed by ``schema.parse``. ``explain=False`` returns the totals only
    (the answers' searches); ``formulas=False`` keeps every number and breakdown row but leaves out the
    records' formulas (the page's keystroke update; its formulas table follows once typing pauses)."""
    return estimate_setup(resolve(values), values, explain, formulas)


def total_bytes(values: dict) -> int:
    """Only the total per GPU of parsed values (FieldError when they cannot work)."""
    return totals_only(values)["total_bytes"]


def totals_only(values: dict) -> dict:
    """``estimate_values(values, explain=False)``, remembered: the answers' searches, plans and charts ask
    for the same setups again (the charts' points are the searches' doublings), and so does the next
    pause in typing. The result is shared: read it, do not change it. A config file is read afresh."""
    if values.get("config"):
        return estimate_values(values, explain=False)
    # Keyed by the items in their order, not sorted (5% of the answers' time in CPython): every caller's
    # values come from schema.parse, in its order, with changes made in place; a dict in another order is
    # only a miss, never a wrong hit.
    return _totals_only(tuple(values.items()))


@lru_cache(maxsize=1024)
def _totals_only(items: tuple) -> dict:
    return estimate_values(dict(items), explain=False)


def estimate_setup(setup: Setup, values: dict, explain: bool = True, formulas: bool = True) -> dict:
    """``estimate`` for a resolved Setup (``values`` names the precision policy in force)."""
    arch = setup.arch
    if setup.workload.training:
        result = training(setup, every_stage=explain)
    else:
        result = serving(setup, gpu_catalog()[setup.gpu])
    pools: "list[Pool]" = result.pop("pools")
    moment_names = tuple(result["moments"])
    host: "list[Pool]" = result.pop("host")
    peak = result["peak_bytes"]
    at_peak = live(pools, result["peak_moment"])
    lay = setup.layout
    extra = overhead_pools(at_peak, setup.overhead, setup.expandable_segments, max(lay.world, lay.ep), peak)
    overhead_bytes = sum(p.bytes for p in extra)
    total = peak + overhead_bytes
    reserved = peak + sum(p.bytes for p in extra if p.group in ("reserved", "overhead"))
    stages = result.pop("stages", None)
    if not explain:
        live_now = [(p.key, p.label, p.bytes) for p in at_peak] + [(p.key, p.label, p.bytes) for p in extra]
        result.update(overhead_bytes=overhead_bytes, total_bytes=total, live=live_now)
        return result
    rows = at_peak + [p for p in extra if p.bytes]
    breakdown = [_row(p, total, formulas) for p in rows]
    work = setup.workload
    result.update(
        model={"name": arch.name, "kind": arch.kind, "source": arch.source, "max_positions": arch.max_positions},
        params={"total": setup.counts.total, "active": setup.counts.active},
        setup={"precision": named_policy(values, arch), "weight_dtype": setup.policy.weight,
               "kv_dtype": setup.policy.kv, "engine": work.engine if not work.training else None,
               "optimizer_impl": setup.optimizer_impl if work.training else None},
        overhead_bytes=overhead_bytes, total_bytes=total, breakdown=breakdown,
        reserved_bytes=reserved, device_bytes=total,
        components=components(pools, moment_names),
        **({"stages": stage_components(stages)} if stages else {}),
        warnings=_warnings(setup),
    )
    if formulas:
        result.update(pools=[p.as_dict() for p in pools], host_pools=[p.as_dict() for p in host],
                      activation_terms=_term_rows(result, setup))
    else:
        result.pop("activation_terms", None)
    if not work.training and work.engine == "vllm":
        result["vllm"] = vllm_capacity(result, work)
    return result


def _row(pool: Pool, total: int, formulas: bool = True) -> dict:
    row = pool.as_dict() if formulas else {"key": pool.key, "label": pool.label, "bytes": pool.bytes,
                                           "source": pool.source, "group": pool.group or pool.key}
    row["percent"] = 100 * pool.bytes / total if total else 0.0
    row.update(format_bytes(pool.bytes))
    return row


def _term_rows(result: dict, setup: Setup) -> "list[dict]":
    """Each saved activation term over the layers on this GPU, split as tensor/sequence parallelism splits it."""
    rows = []
    lay = setup.layout
    full = setup.workload.recompute == "full"
    layers = 1 if full else result["layers"]
    for term in result.get("activation_terms", []):
        ways = lay.tp if (not term.replicated or lay.sp) else 1
        q = rnd(split(sym("b", term.bytes_per_token), "t", ways, None) * sym("T", result["tokens"])
                * sym("Ls", layers))
        rows.append({"name": term.name, "formula": term.formula + " per token and layer", "bytes_per_token":
                     term.bytes_per_token, "bytes": q.value, "symbols": q.symbols, "substituted": q.numbers,
                     "replicated": term.replicated,
                     "source": "one layer, rebuilt during its backward" if full else "all layers on this GPU"})
    return rows


def _warnings(setup: Setup) -> "list[str]":
    arch, work = setup.arch, setup.workload
    notes = []
    if work.training and work.activation_model == "none":
        notes.append("activations are not counted: give layers and hidden (the multiplier model applies), "
                     "activations=per-sample with act_per_sample, or pick a preset")
    if work.training and work.activation_model == "per-sample" and not work.act_per_sample:
        notes.append("activations=per-sample with act_per_sample=0 counts no activations: set act_per_sample")
    limit = arch.max_positions
    if limit and arch.positions != "learned":
        length = work.seq + (work.new_tokens if not work.training else 0)
        if length > limit:
            what = "prompt + new tokens" if not work.training else "seq"
            notes.append(f"{what} = {length:,} tokens is beyond {arch.name}'s {limit:,} positions "
                         "(max_position_embeddings); estimated anyway")
    return notes
