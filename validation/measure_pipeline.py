"""Measure the peak of one pipeline-parallel stage under a 1F1B schedule, for validating pycore's pipeline model.

Dev-only (torch, transformers). One process plays rank k of a world of pp ranks with PyTorch's "fake" process
group (send and recv return at once), so MemTracker sees exactly what one GPU of the pipeline allocates: its
layers' weights, gradients and AdamW state, the activations of the micro-batches it holds in flight, and the
receive buffers (their contents are left as allocated, which changes no byte). The model runs under
FakeTensorMode, as validation/measure.py runs its dense cases (every tensor has its size and no storage):
the same kernels' saved tensors as the single-GPU cases the estimate is held to. (With real CPU tensors a
layer saves about 11% less than under FakeTensorMode, in a single-GPU step of measure.py as in a stage: a
difference of the CPU's kernels, not of the pipeline; ``--real`` measures that way.)

The pipeline is PyTorch's own (torch.distributed.pipelining: PipelineStage and Schedule1F1B), as torchtitan
runs it, on transformers' Llama built as validation/measure.py builds it and split as pycore splits it
(pycore/memory/parallel.py stages): layers divided evenly, the first ones to stage 0; the embedding on
stage 0; the final norm, the output head and the loss on the last stage. The last stage returns the logits
and the schedule's loss function is transformers' ForCausalLMLoss (model.loss_function), as the model
itself would compute it; ``step(..., return_outputs=False)``, so the schedule keeps no merged output.
Cases with ``interleave`` run ScheduleInterleaved1F1B instead: rank k holds v model chunks, the virtual stages
k, k + pp, ... of pp·v (the layers split evenly over them), as pycore's interleave=v describes. GPipe is not
measured: pycore models 1F1B and its interleaved form only. Both schedules refuse fewer micro-batches than
stages, so every case has at least pp of them.

Two things are done for the fake process group, neither changing what a rank allocates:
- Each stage is given its input and output shapes (static metadata). PipelineStage then votes with its
  neighbours over send/recv whether every stage is static; with the fake group a received vote reads 0,
  so the stage's vote exchange is replaced by the answer every rank gives in a real run where all are
  given their shapes: static.
- The stage module is entered once per micro-batch; MemTracker refuses a root module entered again within
  one tracked step, so its module statistics keep the first entry's (the device-wide peak is unaffected).

The receive buffers PipelineStage allocates in the warm-up step and keeps (one per micro-batch for the
activations a later stage receives, one per micro-batch for the gradients an earlier stage receives) are
registered with the tracker, so the recorded step counts them as a GPU would.

Each case runs one warm-up step (optimizer state created), then records the next step (the schedule's
forward and backward of every micro-batch, the optimizer step, ``zero_grad(set_to_none=True)``).

Usage: python validation/measure_pipeline.py            # writes validation/measured_pipeline.json
       python validation/measure_pipeline.py --only pp4   # cases whose label contains 'pp4', printed only
       python validation/measure_pipeline.py --real       # real CPU tensors, printed only
"""

import argparse
import contextlib
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleInterleaved1F1B
from torch.testing._internal.distributed.fake_pg import FakeStore

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "validation"))
import measure  # noqa: E402
from cuda_autocast import cuda_autocast  # noqa: E402

OUT = ROOT / "validation" / "measured_pipeline.json"
SMALL = dict(model="llama-3.1-8b", layers="8", hidden="512", heads="8", kv_heads="2", ffn="1408", vocab="8000")
# (label, inputs, the stages measured): the first stage (the most micro-batches in flight) and the last (the
# head and the loss), with a middle stage where pp=4.
CASES = [
    ("llama small fp32 pp2 mb2 b2s512", dict(**SMALL, precision="fp32", pp="2", microbatches="2", batch="2", seq="512"), (0, 1)),
    ("llama small fp32 pp2 mb4 b2s512", dict(**SMALL, precision="fp32", pp="2", microbatches="4", batch="2", seq="512"), (0, 1)),
    ("llama small fp32 pp2 mb8 b2s512", dict(**SMALL, precision="fp32", pp="2", microbatches="8", batch="2", seq="512"), (0, 1)),
    ("llama small bf16 pp2 mb4 b4s512", dict(**SMALL, precision="bf16", pp="2", microbatches="4", batch="4", seq="512"), (0, 1)),
    ("llama small fp32 pp4 mb4 b2s512", dict(**SMALL, precision="fp32", pp="4", microbatches="4", batch="2", seq="512"), (0, 3)),
    ("llama small fp32 pp4 mb8 b2s512", dict(**SMALL, precision="fp32", pp="4", microbatches="8", batch="2", seq="512"), (0, 1, 3)),
    ("llama small bf16 pp4 mb4 b4s512", dict(**SMALL, precision="bf16", pp="4", microbatches="4", batch="4", seq="512"), (0, 3)),
    ("llama small bf16 pp4 mb8 b2s1024", dict(**SMALL, precision="bf16", pp="4", microbatches="8", batch="2", seq="1024"), (0, 1, 3)),
    ("llama small amp-bf16 pp4 mb8 b2s1024", dict(**SMALL, precision="amp-bf16", pp="4", microbatches="8", batch="2",
                                                  seq="1024"), (0, 1, 3)),
    # interleaved 1F1B: v model chunks a GPU
    ("llama small fp32 pp2 interleave 2 mb4 b2s512", dict(**SMALL, precision="fp32", pp="2", interleave="2",
                                                          microbatches="4", batch="2", seq="512"), (0, 1)),
    ("llama small bf16 pp4 interleave 2 mb8 b2s1024", dict(**SMALL, precision="bf16", pp="4", interleave="2",
                                                           microbatches="8", batch="2", seq="1024"), (0, 1, 3)),
    ("llama small bf16 full-recompute pp4 mb8 b4s1024", dict(**SMALL, precision="bf16", recompute="full", pp="4",
                                                            microbatches="8", batch="4", seq="1024"), (0, 3)),
]


class StaticVote:
    """The vote every stage agrees on (1: static), read by the schedule with .item() (outside fake tensors)."""

    def item(self):
        return 1


STATIC_VOTE = StaticVote()


class StaticStage(PipelineStage):
    """PipelineStage whose shape vote returns what every rank of a real run returns when each is given its
    shapes (static); the fake process group's recv would read a vote of 0."""

    def _warmup_forward_vote(self, has_backward, received_acc=None):
        return STATIC_VOTE

    def _warmup_backward_result(self, received_result=None):
        return STATIC_VOTE


def autocast(module):
    """amp-* cases: the forward (and the loss) under autocast, as validation/measure.py's train_step runs them;
    the backward outside it. CUDA's casting rules come from cuda_autocast() around the step."""
    dtype = getattr(module, "autocast_dtype", None)
    return torch.autocast("cpu", dtype=dtype) if dtype is not None else contextlib.nullcontext()


class FirstStage(torch.nn.Module):
    """The embedding and the first layers: token ids in, hidden states out."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, ids):
        with autocast(self):
            return self.inner(input_ids=ids).last_hidden_state


class MiddleStage(torch.nn.Module):
    """Layers only: hidden states in and out."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, hidden):
        with autocast(self):
            return self.inner(inputs_embeds=hidden).last_hidden_state


class LastStage(torch.nn.Module):
    """The last layers, the final norm and the output head: hidden states in, logits out."""

    def __init__(self, causal_lm):
        super().__init__()
        self.causal_lm = causal_lm

    def forward(self, hidden):
        with autocast(self):
            return self.causal_lm.lm_head(self.causal_lm.model(inputs_embeds=hidden).last_hidden_state)


def stage_module(model, arch, pp, rank):
    """The part of the model stage ``rank`` holds, split as pycore.memory.parallel.stages splits it."""
    counts = [arch.layers // pp + (1 if i < arch.layers % pp else 0) for i in range(pp)]
    first = sum(counts[:rank])
    model.model.layers = torch.nn.ModuleList(list(model.model.layers)[first:first + counts[rank]])
    if rank != 0:
        model.model.embed_tokens = None
    if rank != pp - 1:
        model.model.norm = torch.nn.Identity()
        return FirstStage(model.model) if rank == 0 else MiddleStage(model.model)
    return LastStage(model)


def track_repeated_root(tracker, root):
    """MemTracker refuses a root module entered again in one step; the schedule enters it per micro-batch."""
    first_entry = tracker._pre_fw_hook

    def pre_forward(module, args):
        if module is root and module in tracker.memory_tracking and not tracker._mod_tracker.is_bw:
            return
        first_entry(module, args)
    tracker._pre_fw_hook = pre_forward


def recv_buffers(stage):
    """The receive buffers the stage allocated in the warm-up step and keeps."""
    infos = [info for table in (stage.args_recv_info, stage.grad_recv_info) for chunk in table.values()
             for info in chunk]
    return [info.buffer for info in infos if getattr(info, "buffer", None) is not None]


def run_case(label, inputs, rank, fake=True):
    pp, microbatches = int(inputs["pp"]), int(inputs["microbatches"])
    dist.init_process_group("fake", rank=rank, world_size=pp, store=FakeStore())
    try:
        with FakeTensorMode(allow_non_fake_inputs=True) if fake else contextlib.nullcontext():
            return measure_stage(label, inputs, rank, pp, microbatches) | {"tensor_mode": "fake" if fake else "real"}
    finally:
        dist.destroy_process_group()


def build_chunk(inputs, stages, index):
    """The model, and the part of it virtual stage ``index`` of ``stages`` holds."""
    values, arch, model = measure.build(inputs)
    if values["recompute"] == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    module = stage_module(model, arch, stages, index)
    module.train()
    if values["precision"].startswith("amp-"):
        module.autocast_dtype = measure.DTYPES[values["precision"][4:]]
    return values, arch, model, module


def pipeline_stage(module, index, stages, values, arch):
    """PipelineStage with its input and output shapes given (static): token ids or hidden states in, hidden
    states or logits out."""
    batch, seq, dtype = values["batch"], values["seq"], next(module.parameters()).dtype
    example_in = torch.zeros(batch, seq, dtype=torch.long) if index == 0 else \
        torch.empty(batch, seq, arch.hidden, dtype=dtype, requires_grad=True)
    width = arch.vocab if index == stages - 1 else arch.hidden
    example_out = torch.empty(batch, seq, width, dtype=dtype, requires_grad=True)
    return StaticStage(module, index, stages, torch.device("cpu"), input_args=example_in, output_args=example_out)


def measure_stage(label, inputs, rank, pp, microbatches):
    """Build the stage (or, interleaved, the model chunks) rank ``rank`` holds, run a warm-up step, and record
    the next step's peak. Interleaved with v chunks a GPU, rank k holds virtual stages k, k + pp, ...
    (ScheduleInterleaved1F1B's looped placement), the layers split evenly over pp·v virtual stages."""
    torch.manual_seed(0)
    started = time.time()
    chunks = int(inputs.get("interleave", "1"))
    built = [build_chunk(inputs, pp * chunks, rank + k * pp) for k in range(chunks)]
    values, arch, model, _ = built[0]
    modules = [module for *_, module in built]
    stages = [pipeline_stage(module, rank + k * pp, pp * chunks, values, arch) for k, module in enumerate(modules)]

    def loss_fn(logits, labels):
        with autocast(modules[-1]):
            return model.loss_function(logits=logits, labels=labels, vocab_size=arch.vocab)
    schedule = Schedule1F1B(stages[0], microbatches, loss_fn=loss_fn) if chunks == 1 else \
        ScheduleInterleaved1F1B(stages, microbatches, loss_fn=loss_fn)
    optimizer = measure.make_optimizer([p for m in modules for p in m.parameters()], values["optimizer"])
    ids = torch.randint(0, arch.vocab, (values["batch"] * microbatches, values["seq"]))
    labels = ids.clone()

    def step():
        if rank == 0:
            schedule.step(ids, return_outputs=False)
        elif rank == pp - 1:
            schedule.step(target=labels, losses=[], return_outputs=False)
        else:
            schedule.step(return_outputs=False)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    with cuda_autocast(True):
        step()
    tracker = MemTracker()
    tracker.track_external(*modules, optimizer, ids, labels, *(b for stage in stages for b in recv_buffers(stage)))
    for module in modules:
        track_repeated_root(tracker, module)
    with tracker, cuda_autocast(True):
        step()
    (device_peak,) = tracker.get_tracker_snapshot("peak").values()
    return {"label": f"{label} stage {rank}", "inputs": inputs, "stage": rank,
            "params": sum(p.numel() for m in modules for p in m.parameters()), "peak_bytes": device_peak["Total"],
            "peak_breakdown": {str(getattr(k, "value", k)): v for k, v in device_peak.items() if k != "Total"},
            "seconds": round(time.time() - started, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="run only cases whose label contains this text; print, do not save")
    parser.add_argument("--real", action="store_true", help="real CPU tensors instead of FakeTensorMode; print only")
    args = parser.parse_args()
    results = []
    for label, inputs, ranks in CASES:
        if args.only and args.only not in label:
            continue
        for rank in ranks:
            result = run_case(label, inputs, rank, fake=not args.real)
            print(f"{result['label']:60s} peak {result['peak_bytes'] / 2**30:8.4f} GiB  {result['seconds']:6.1f}s  "
                  f"{result['peak_breakdown']}", flush=True)
            results.append(result)
    if not args.only and not args.real:
        measure.write_record(OUT, "Per-GPU peak of one pipeline stage under torch.distributed.pipelining's "
                                  "Schedule1F1B, recorded by validation/measure_pipeline.py", results)


if __name__ == "__main__":
    main()
