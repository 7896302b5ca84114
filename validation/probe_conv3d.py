"""What the Qwen vision towers' patch embedding holds for a moment on a GPU: one Conv3d whose kernel equals its stride.

Dev-only: needs torch with CUDA and a GPU. Qwen2.5-VL, Qwen3-VL and Qwen3.5 (transformers 5.24,
``Qwen2_5_VisionPatchEmbed`` / ``Qwen3VLVisionPatchEmbed``) view the processor's flat patches as
(N, 3, temporal_patch_size, patch, patch) and run ``nn.Conv3d(3, hidden, kernel=stride=(2, p, p))`` over them in the
tower's dtype; on CUDA that is cuDNN's convolution, which allocates a workspace and its output beside the input. For
each shape below the script makes the same input and convolution, runs it once to warm cuDNN's choice up (as the
measured generate() calls are warmed up), then records the measured call: the peak above what was allocated before
it (``torch.cuda.max_memory_allocated``), what it left allocated (its output), and the size of every block the caching
allocator handed out during the call (``torch.cuda.memory._record_memory_history``).

Usage:
    python validation/probe_conv3d.py > validation/measured_conv3d.json
"""

import json
import sys

import torch

# (patches N, output channels, temporal patch, spatial patch, bias, dtype): the small configs' shapes of
# validation/measure_vl.py (hidden 128 and 256) at the image sizes of its cases, and the whole towers' widths
# (Qwen2.5-VL-7B 1,280 without bias, Qwen3-VL-4B 1,024 and Qwen3.5-9B 1,152 with bias) up to a 3,584-pixel image,
# in bf16 and in fp32; and widths between 64 and 224
SHAPES = (
    [(n, c, 2, 14, False, d) for n in (256, 512, 1024, 2048, 4096, 8192, 16384) for c in (128, 256)
     for d in ("bfloat16", "float32")]
    + [(n, c, 2, 16, True, d) for n in (256, 800, 1600, 3136, 6400, 12544) for c in (128, 256)
       for d in ("bfloat16", "float32")]
    + [(n, 1280, 2, 14, False, "bfloat16") for n in (1024, 4784, 16384, 65536)]
    + [(n, c, 2, 16, True, "bfloat16") for n in (1024, 3680, 16384, 50176) for c in (1024, 1152)]
    # between the widths above, and the published widths in fp32
    + [(n, c, 2, 14, False, "bfloat16") for n in (1024, 4096) for c in (64, 96, 160, 192, 224)]
    + [(n, c, 2, p, p == 16, "float32") for n in (1024, 4784) for c, p in ((1280, 14), (1024, 16), (1152, 16))]
)


def probe(n, channels, temporal, patch, bias, dtype):
    dtype = getattr(torch, dtype)
    conv = torch.nn.Conv3d(3, channels, (temporal, patch, patch), stride=(temporal, patch, patch), bias=bias)
    conv = conv.to("cuda", dtype)
    pixels = torch.randn(n, 3 * temporal * patch * patch, device="cuda", dtype=dtype)
    with torch.no_grad():
        x = pixels.view(-1, 3, temporal, patch, patch)
        conv(x)                                         # warm-up: cuDNN's heuristics and its handle
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        torch.cuda.memory._record_memory_history(max_entries=10000)
        out = conv(x)
        torch.cuda.synchronize()
        trace = torch.cuda.memory._snapshot()["device_traces"][0]
        torch.cuda.memory._record_memory_history(enabled=None)
    record = {"patches": n, "channels": channels, "kernel": [temporal, patch, patch], "bias": bias,
              "dtype": str(dtype).removeprefix("torch."), "pixel_bytes": pixels.numel() * pixels.element_size(),
              "output_bytes": out.numel() * out.element_size(),
              "peak_rise": torch.cuda.max_memory_allocated() - before,
              "held_after": torch.cuda.memory_allocated() - before,
              "blocks": [event["size"] for event in trace if event["action"] == "alloc"]}
    del out, x, pixels, conv
    torch.cuda.empty_cache()
    return record


def main():
    print(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                      "cases": [probe(*shape) for shape in SHAPES]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
