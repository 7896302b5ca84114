"""What is live at a CUDA step's peak, from PyTorch's allocator history (torch.cuda.memory._snapshot()).

Dev-only, used by validation/measure_cuda.py --explain: the measured step runs with
``torch.cuda.memory._record_memory_history(stacks="python")``; this module replays the trace's allocations
and frees, finds the moment the allocated bytes peak, and lists the blocks live then, by the Python line
that made them (blocks allocated in backward carry no Python frames and are listed as such).
"""

import collections

SKIP = ("torch/utils/", "torch/_", "contextlib.py", "torch/autograd/", "torch/nn/modules/module.py")


def where(frames):
    """The innermost frame of the model's or the library's own code, as 'file:line name'."""
    for frame in frames:
        name = frame.get("filename", "")
        if not any(skip in name for skip in SKIP):
            return f"{name.split('site-packages/')[-1]}:{frame.get('line')} {frame.get('name')}"
    return "(no Python frame: backward or a C++ caller)"


def peak_blocks(trace):
    """Replay one device's trace. Returns (peak bytes above the start, [(size, where)] live at the peak)."""
    live, current, peak, peak_index = {}, 0, 0, -1
    for i, event in enumerate(trace):
        if event["action"] == "alloc":
            live[event["addr"]] = event["size"]
            current += event["size"]
            if current > peak:
                peak, peak_index = current, i
        elif event["action"] == "free_requested" and event["addr"] in live:
            current -= live.pop(event["addr"])
    blocks = {}
    for event in trace[:peak_index + 1]:
        if event["action"] == "alloc":
            blocks[event["addr"]] = (event["size"], where(event.get("frames", [])))
        elif event["action"] == "free_requested":
            blocks.pop(event["addr"], None)
    return peak, list(blocks.values())


def summary(snapshot, start_bytes, peak_bytes, top=25):
    """Text: the peak, what was allocated before the step, and the step's live blocks grouped by origin."""
    (trace,) = [t for t in snapshot["device_traces"] if t] or [[]]
    rise, blocks = peak_blocks(trace)
    groups = collections.defaultdict(lambda: [0, 0])
    for size, origin in blocks:
        groups[origin][0] += size
        groups[origin][1] += 1
    lines = [f"max_memory_allocated {peak_bytes:,}; before the step {start_bytes:,}; replayed rise {rise:,} "
             f"(start + rise = {start_bytes + rise:,})"]
    for origin, (size, count) in sorted(groups.items(), key=lambda kv: -kv[1][0])[:top]:
        lines.append(f"{size / 2**20:12.2f} MiB  {count:5d} blocks  {origin}")
    return "\n".join(lines)
