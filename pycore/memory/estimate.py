"""The estimator: inputs in, bytes per GPU out, every byte in a record that explains itself.

``estimate(inputs)`` parses the inputs (pycore.inputs.schema), resolves them into a typed Setup (pycore.memory.setup),
builds the memory pools of the worst GPU (pycore.memory.training or pycore.memory.serving; model states in
pycore.memory.model_states, activations in pycore.memory.activations), and sums the pools live at each moment. The
peak is the largest moment, what ``torch.cuda.max_memory_allocated()`` reports; the breakdown is the
pools live at that moment plus the runtime overhead, and adds up to the total exactly.
"""

from dataclasses import replace
from functools import lru_cache
from typing import Any

from pycore.base.errors import FieldError, InputError
from pycore.base.expr import rnd, split, sym
from pycore.base.units import printable
from pycore.inputs.schema import Values, parse
from pycore.memory import model_states, vision_activations, vllm_multimodal
from pycore.memory.device import compute_capability, overhead_pools, runtime_note
from pycore.memory.distillation import notes as distill_notes
from pycore.memory.pools import Pool, StageResult, live, stage_components
from pycore.memory.posttraining import notes as kto_notes
from pycore.memory.ppo import notes as ppo_notes
from pycore.memory.precision import checkpoint_dtype, named_policy
from pycore.memory.record import JSON, Estimate, LayoutInfo, ModelInfo, SetupInfo
from pycore.memory.rollout import engine_capacity
from pycore.memory.rollout import notes as grpo_notes
from pycore.memory.serving import NO_METAL, kv_cache_bytes, max_num_seqs, refusal, serving, vllm_capacity
from pycore.memory.setup import Setup, quantization_of, resolve, resolve_architecture
from pycore.memory.training import training
from pycore.model.catalog import gpus as gpu_catalog
from pycore.model.catalog import preset_id
from pycore.model.mixers import ATTENTION, MIXERS, STATEFUL, layer_counts, layers_read

__all__ = ["Estimate", "estimate", "estimate_values", "estimate_setup", "kv_cache_bytes", "quantization_of",
           "resolve_architecture", "FieldError", "InputError"]


def estimate(inputs: "dict[str, str]") -> Estimate:
    """Estimate memory per GPU.

    Args:
        inputs: key -> string mapping in the schema (pycore/inputs/schema.py).
    Returns:
        The Estimate record (pycore/memory/record.py): its pools, the step's moments, the totals in each
        memory view; ``breakdown`` holds the pools live at the peak plus the overhead, summing to
        ``total_bytes``. ``as_dict()`` is its JSON.
    Raises:
        FieldError naming the key when an input is not acceptable.
    """
    return estimate_values(parse(inputs))


def estimate_values(values: Values, explain: bool = True) -> Estimate:
    """``estimate`` for values already parsed by ``schema.parse``. ``explain=False`` leaves out what only an
    explanation needs (every pipeline stage's summary, the activation terms): the answers' searches."""
    return estimate_setup(resolve(values), values, explain)


def total_bytes(values: Values) -> int:
    """Only the total per GPU of parsed values (FieldError when they cannot work)."""
    return totals_only(values).total_bytes


def totals_only(values: Values) -> Estimate:
    """``estimate_values(values, explain=False)``, remembered: the answers' searches, plans and charts ask
    for the same setups again (the charts' points are the searches' doublings), and so does the next
    pause in typing. A config file is read afresh."""
    if values.get("config"):
        return estimate_values(values, explain=False)
    # Keyed by the items in their order, not sorted (5% of the answers' time in CPython): every caller's
    # values come from schema.parse, in its order, with changes made in place; a dict in another order is
    # only a miss, never a wrong hit.
    return _totals_only(tuple(values.items()))


@lru_cache(maxsize=1024)
def _totals_only(items: "tuple[tuple[str, Any], ...]") -> Estimate:
    return estimate_values(dict(items), explain=False)


def estimate_setup(setup: Setup, values: Values, explain: bool = True) -> Estimate:
    """``estimate`` for a resolved Setup (``values`` names the precision policy in force)."""
    arch, work, lay = setup.arch, setup.workload, setup.layout
    if work.training:
        result = training(setup, every_stage=explain)
    else:
        result = serving(setup, gpu_catalog()[setup.gpu])
    pools: "list[Pool]" = result["pools"]
    peak = result["peak_bytes"]
    at_peak = live(pools, result["peak_moment"])
    extra = overhead_pools(at_peak, setup.overhead, setup.expandable_segments, max(lay.world, lay.ep), peak,
                           setup.cuda_modules, gpu_catalog()[setup.gpu].get("runtime", "CUDA"))
    overhead_bytes = sum(p.bytes for p in extra)
    stages = result.get("stages")
    kv_per_token = result.get("kv_bytes_per_token")
    record = Estimate(
        model=ModelInfo(arch.name, arch.kind, arch.source, arch.max_positions,
                        _preset_named(values, arch.name) if arch.kind != "generic" else "", layers_read(arch)),
        params_total=setup.counts.total, params_active=setup.counts.active,
        setup=SetupInfo(named_policy(values, arch), setup.policy.weight, setup.policy.kv,
                        None if work.training else work.engine, setup.optimizer_impl if work.training else None,
                        values["method"] if work.training and values["method"] != "full" else None, work.attention),
        layout=LayoutInfo(lay.world, lay.dp, lay.tp, lay.pp, lay.cp, lay.ep),
        moments=result["moments"], phases=result["phases"], peak_moment=result["peak_moment"],
        peak_phase=result["peak_phase"], peak_bytes=peak,
        reserved_bytes=peak + sum(p.bytes for p in extra if p.group in ("reserved", "overhead")),
        total_bytes=peak + overhead_bytes, overhead_bytes=overhead_bytes, host_bytes=result["host_bytes"],
        stage=result["stage"], layers=result["layers"], params_per_gpu=result["params_per_gpu"],
        tokens=result["tokens"], kv_bytes_per_token=kv_per_token,
        pools=tuple(pools), breakdown=tuple(at_peak + [p for p in extra if p.bytes]), host_pools=tuple(result["host"]),
        activation_terms=tuple(_term_rows(result, setup)) if explain else (),
        stages=tuple(stage_components(stages)) if stages and explain else (),
        vllm=None, warnings=tuple(_warnings(setup)) + _unused_vision_inputs(setup, values) + _dtype_unknown(setup, values))
    if not work.training and work.engine == "vllm":
        capacity = vllm_capacity({"kv_bytes_per_token": kv_per_token, "components": record.components,
                                  "state_bytes_per_sequence": result.get("state_bytes_per_sequence", 0),
                                  "vllm_pages": result.get("vllm_pages"), "max_positions": arch.max_positions,
                                  "available": result.get("vllm_available")}, work)
        capacity, said = _bf16_on_older_gpus(setup, values, capacity)
        record = replace(record, warnings=record.warnings + said)
        if explain:         # the searches' estimates need not say
            encoder = vllm_multimodal.encoder_log(setup, max_num_seqs(work, gpu_catalog()[setup.gpu]))
            if encoder or (work.mm_profiling == "off" and arch.vision_layers):
                capacity["encoder_profile"] = encoder or {"skipped": True}     # the log's line (answers._vllm_log)
            steps = vllm_multimodal.profile_steps(setup)
            capacity = {**capacity, "longest_max_model_len": _longest_over_profiles(setup, values, capacity, steps),
                        "profiled_longest": bool(steps)}
        return replace(record, vllm=capacity, warnings=_engine_refusals(setup, capacity, vllm_multimodal.refusal_hint(
            setup)) + record.warnings)
    if work.training and setup.finetune.rollout == "vllm-colocate" and setup.finetune.recipe in ("grpo", "distill"):
        # the colocated rollout engine starts with the trainer: its refusal is the step's (pycore.memory.rollout)
        capacity = engine_capacity(setup)
        return replace(record, vllm=capacity, warnings=_engine_refusals(setup, capacity) + record.warnings)
    return record


def _bf16_on_older_gpus(setup: Setup, values: Values, capacity: "dict[str, Any]") -> \
        "tuple[dict[str, Any], tuple[str, ...]]":
    """vLLM 0.11 on a CUDA GPU below compute capability 8.0, which has no bf16: bf16 asked for (precision) is refused
    as the worker starts (platforms/cuda.py check_if_supports_dtype); a bf16 checkpoint at precision=auto (--dtype
    auto) is served in float16 instead, the same bytes, and said (config/model.py _resolve_auto_dtype)."""
    gpu = gpu_catalog()[setup.gpu]
    sm = compute_capability(gpu)
    if not sm or sm >= 80 or setup.policy.weight != "bf16":
        return capacity, ()
    if checkpoint_dtype(values):
        return capacity, (f"vLLM's --dtype auto serves this model in float16 on the {gpu['name']} (compute "
                          f"capability {sm // 10}.{sm % 10}, no bf16) where bf16 is counted (vllm/config/model.py "
                          "_resolve_auto_dtype): the same bytes",)
    return {**capacity, "starts": False, "no_bf16": (gpu["name"], sm)}, ()


def _engine_refusals(setup: Setup, capacity: "dict[str, Any]", hint: str = "") -> "tuple[str, ...]":
    """What keeps a vLLM engine from starting: no vLLM on a Metal GPU, then its start-up check's refusal (with
    ``hint``, what to change)."""
    metal = (NO_METAL,) if gpu_catalog()[setup.gpu].get("runtime") == "Metal" else ()
    hint = "" if "over_positions" in capacity else hint       # no profiling change shortens a max_model_len
    return metal + ((refusal(capacity) + hint,) if not capacity["starts"] else ())


def _dtype_unknown(setup: Setup, values: Values) -> "tuple[str, ...]":
    """A config.json (config=) that names no dtype, served with precision=auto: the bf16 it is taken in, said."""
    if not values.get("config") or setup.arch.dtype or setup.workload.training or values.get("precision") != "auto":
        return ()
    return ("config.json names no dtype (torch_dtype): its weights are served as bf16; give precision (fp16, bf16, "
            "fp32) if the checkpoint's is another",)


def _unused_vision_inputs(setup: Setup, values: Values) -> "tuple[str, ...]":
    """images and mm_profiling on a model without a vision tower pycore counts: said, not silently dropped (the page
    cannot tell from the inputs alone which models have one, so pycore.inputs.applies does not)."""
    if setup.arch.vision_layers:
        return ()
    vllm = values.get("mode") == "infer" and values.get("engine") == "vllm"
    given = [key for key, unset in (("images", 0), ("mm_profiling", "auto"))
             if values.get(key) not in (None, unset) and (key == "images" or vllm)]
    return tuple(f"{key} is ignored: {setup.arch.name} has no vision tower pycore counts" for key in given)


def _longest_over_profiles(setup: Setup, values: Values, capacity: "dict[str, Any]",
                           steps: "list[int]") -> "int | None":
    """The longest max_model_len vLLM would accept when its encoder profiling grows with it (Qwen2.5-VL's dummy video,
    a frame pair a step, InternVL's a frame every 256 tokens: ``steps``, pycore.memory.vllm_multimodal.profile_steps):
    the highest span of one profile whose own limit reaches the span, whose answer is then the largest. The profile
    need not grow from span to span (fewer items, or outputs no longer padded to the budget, can make a longer one
    smaller), but within a run of spans alike in those (vllm_multimodal.profile_key) it only grows, so a limit can only
    fall: each run, from the highest, is bisected for its last span that reaches its own."""
    if not steps:
        return capacity.get("longest_max_model_len")
    longest = int(capacity.get("longest_max_model_len") or 0)
    context, positions = int(capacity["context"]), setup.arch.max_positions
    spans = list(zip([1, *steps], [*steps, 0]))
    seqs = max_num_seqs(setup.workload, gpu_catalog()[setup.gpu])
    keys = [vllm_multimodal.profile_key(setup, seqs, begin) for begin, _ in spans]

    def reach(begin: int, end: int) -> int:
        # this estimate's own span, unless its max_model_len is past the positions, where the steps stop and the
        # profile grows on
        if begin <= context < (end or context + 1) and not (positions and context > positions):
            return longest
        span = replace(setup, workload=replace(setup.workload, max_model_len=begin))
        return int((estimate_setup(span, values, explain=False).vllm or {}).get("longest_max_model_len") or 0)

    runs, first = [], 0
    for index in range(1, len(spans) + 1):
        if index == len(spans) or keys[index] != keys[first]:
            runs.append((first, index - 1))
            first = index
    for low, high in reversed(runs):
        best = None
        while low <= high:                  # the run's last span that reaches its own start
            middle = (low + high) // 2
            begin, end = spans[middle]
            limit = reach(begin, end)
            if limit >= begin:
                best, low = (min(limit, end - 1) if end else limit), middle + 1
            else:
                high = middle - 1
        if best is not None:
            return min(best, positions) if positions else best     # vLLM accepts none past them
    return 0


def _term_rows(result: StageResult, setup: Setup) -> "list[JSON]":
    """Each saved activation term over the layers on this GPU, split as tensor/sequence parallelism splits it."""
    rows = []
    lay = setup.layout
    recompute = setup.workload.recompute
    full = recompute == "full"
    layers = 1 if full else result["layers"] / 2 if recompute == "layer" else result["layers"]
    for term in result.get("activation_terms", ()):
        ways = lay.tp if (not term.replicated or lay.sp) else 1
        q = rnd(split(sym("b", term.bytes_per_token), "t", ways, None) * sym("T", result["tokens"])
                * sym("Ls", layers))
        rows.append({"name": term.name, "formula": term.formula + " per token and layer", "bytes_per_token":
                     term.bytes_per_token, "bytes": q.value, "symbols": q.symbols, "substituted": q.numbers,
                     "replicated": term.replicated,
                     "source": "one layer, rebuilt during its backward" if full else "the layers not checkpointed "
                     "(every 2nd layer is)" if recompute == "layer" else "all layers on this GPU"})
    return rows


# Bits per parameter a whole checkpoint can plausibly take: from llama.cpp's IQ1_S, 1.56 bits a weight (the table in
# its tools/quantize/quantize.cpp), to fp32 with per-tensor extras; outside them weight_bytes was read for another model
BITS_PER_PARAM = (1.5, 33.0)


def _checkpoint_mismatch(setup: Setup) -> "list[str]":
    """A note when weight_bytes cannot be this model's checkpoint: fewer bits per parameter than any quantization
    stores, or more than fp32 (a checkpoint read, then another model chosen)."""
    params = setup.counts.total
    if not setup.weight_bytes or not params:
        return []
    bits = 8 * setup.weight_bytes / params
    if BITS_PER_PARAM[0] <= bits <= BITS_PER_PARAM[1]:
        return []
    files = f" ({printable(setup.weight_files, 80)})" if setup.weight_files else ""
    how = "fewer than any quantization stores" if bits < BITS_PER_PARAM[0] else "more than fp32 weights take"
    name = "this model" if setup.arch.kind == "generic" else setup.arch.name
    return [f"weight_bytes {setup.weight_bytes:,}{files} is {bits:.2f} bits per parameter of {name} "
            f"({params:,} parameters), {how}: was it read for another model? Clear weight_bytes to count the weights "
            "from the parameters"]


def _kernel_notes(setup: Setup) -> "list[str]":
    """The attention kernel where it is not the fused one a user would assume: SDPA's math kernel (attention=auto),
    or attention=flash asked for where CUDA's SDPA would run the math kernel."""
    from pycore.memory.activations import gqa_math_kernel, math_share
    arch, work = setup.arch, setup.workload
    sm = compute_capability(gpu_catalog()[setup.gpu])
    if work.engine == "vllm" and not work.training or not sm or not work.hf_model:
        return []
    e, amp = setup.policy.bytes("act"), setup.policy.autocast
    if work.attention == "flash-math":
        return ["attention: transformers' SDPA meets grouped-query heads here (fp32, or a GPU before sm_80), and "
                "CUDA's flash kernel takes 16-bit inputs only while its memory-efficient one takes no grouped heads: "
                "the math kernel runs, which keeps each layer's s×s probabilities where the layer has no mask "
                "(validation/measured_cuda.json)"]
    if work.attention == "flash" and arch.heads and not (arch.attn_softcap or arch.attention_sinks) and \
            math_share(arch, work.seq) and gqa_math_kernel(arch, e, amp, sm):
        return ["attention=flash is counted as asked, but CUDA's SDPA runs its math kernel for grouped-query heads "
                "in fp32 (and FlashAttention-2 takes 16-bit inputs only): attention=auto counts the math kernel's "
                "probabilities"]
    return []


def _warnings(setup: Setup) -> "list[str]":
    arch, work = setup.arch, setup.workload
    notes = []
    if work.training and work.activation_model == "none":
        notes.append("activations are not counted: give layers and hidden (the multiplier model applies), "
                     "activations=per-sample with act_per_sample, or pick a preset")
    if work.training and work.activation_model == "per-sample" and not work.act_per_sample:
        notes.append("activations=per-sample with act_per_sample=0 counts no activations: set act_per_sample")
    notes += _hybrid_notes(setup)
    notes += _kernel_notes(setup)
    if setup.checkpoint_unused:
        notes.append(f"weight_bytes (a checkpoint's headers) is not used: {setup.checkpoint_unused}; the weights are "
                     "counted from the parameters")
    notes += _checkpoint_mismatch(setup)
    notes += grpo_notes(setup)
    notes += kto_notes(setup)
    notes += ppo_notes(setup)
    notes += distill_notes(setup)
    runtime = runtime_note(gpu_catalog()[setup.gpu].get("runtime", "CUDA"))
    if runtime and setup.overhead is None:
        notes.append(runtime)
    profiled = not work.training and work.engine == "vllm" and arch.vision_layers > 0
    if work.image_tokens:
        notes.append(f"the images of each sequence add {work.image_tokens:,} tokens to it (as {arch.name}'s image "
                     f"processor makes them, pycore/model/vision.py), counted with its text" +
                     ("" if profiled else f"; {vision_activations.note(setup)}"))
    if profiled:
        notes.append(vllm_multimodal.note(setup, max_num_seqs(work, gpu_catalog()[setup.gpu])))
    if work.training and arch.vision_layers and not work.images:
        tower = model_states.ungraded_params(setup)
        notes.append(f"no images (images=0): the vision tower never runs, so its {tower:,} parameters get no gradient "
                     "or optimizer state" if tower else "no images (images=0): the vision tower never runs; ZeRO/FSDP's "
                     "flat buffers or fp32 master weights still hold its gradients and optimizer state")
    limit = arch.max_positions
    if limit and arch.positions != "learned":
        length = work.seq + (work.new_tokens if not work.training else 0)
        if length > limit:
            what = "prompt + new tokens" if not work.training else "seq"
            engine = " (vLLM refuses a longer max_model_len without it)" if work.engine == "vllm" and \
                not work.training else ""
            # a model without attention layers has no rotary positions to scale: vLLM only caps max_model_len
            rotary = arch.positions == "rotary" and \
                (not arch.layer_pattern or any(kind in ATTENTION for kind in arch.layer_pattern))
            fix = "rope scaling must be configured for it to work" if rotary else \
                "the model has no rotary positions to scale (no attention layers, or NoPE), but its config caps " \
                "the context there"
            engine = engine.replace(" without it", "") if not rotary else engine
            notes.append(f"{what} = {length:,} tokens is beyond {arch.name}'s {limit:,} positions "
                         f"(max_position_embeddings): {fix}{engine}; the memory is estimated for all {length:,}")
    return notes


def _hybrid_notes(setup: Setup) -> "list[str]":
    """What is not yet modelled layer by layer in a hybrid: said, never dropped silently."""
    arch, work = setup.arch, setup.workload
    layers = layer_counts(arch)
    stateful = {MIXERS[m]: n for m, n in layers.items() if m in STATEFUL}
    if not stateful:
        return []
    read = ", ".join(f"{n} {kind}" for kind, n in stateful.items())
    if work.scan_kernels == "fused":
        kernels = ("as the fused kernels of mamba_ssm, causal_conv1d and flash-linear-attention save them (gated "
                   "DeltaNet's measured with flash-linear-attention on an H200, the others from their source; "
                   "scan_kernels=reference gives transformers' torch scans, measured)")
    else:
        kernels = ("as transformers' reference torch scans save them (measured: validation/measure_hybrid.py); with "
                   "mamba_ssm, causal_conv1d or flash-linear-attention installed a GPU runs fused kernels that keep "
                   "several times less (scan_kernels=fused: flash-linear-attention's measured, the others from their source)")
    if work.training:
        return [f"this hybrid's {read} layers' saved tensors are counted {kernels}"]
    if work.engine != "vllm":
        return [f"this hybrid's {read} layers keep a recurrent state instead of a KV cache; the prefill working set "
                f"is counted {kernels}"]
    return []


def _preset_named(values: "Values", name: str) -> str:
    """The preset a model was built from when it is not that preset itself (overrides, a display name); ""
    for the preset under its id or an alias, a config, or a generic network."""
    if values.get("config"):
        return ""
    preset = preset_id(str(values["model"]))
    return preset if preset and name != preset else ""
