"""The CUDA context as the user's stack makes it (issue 27): lazily loaded kernels by default, every kernel at
start-up on older stacks."""

from pycore import estimate


def _context(result):
    return next(p.bytes for p in result.breakdown if p.key == "cuda_context")


def test_lazy_is_the_default_and_eager_is_the_older_stacks_figure():
    # 758 MiB: the median over an H200's training steps (validation/measured_cuda.json, the driver's figure less
    # max_memory_reserved; pycore/memory/device.py); 1,343 MiB: the transformers
    # docs' model_memory_anatomy.md reading on a V100 before any tensor ("GPU memory occupied: 1343 MB").
    lazy = estimate({"model": "bert-large-uncased", "seq": "512"})
    eager = estimate({"model": "bert-large-uncased", "seq": "512", "cuda_modules": "eager"})
    assert _context(lazy) == 758 * 2**20 and _context(eager) == 1343 * 2**20
    assert eager.total_bytes - lazy.total_bytes == (1343 - 758) * 2**20
    assert eager.peak_bytes == lazy.peak_bytes and eager.reserved_bytes == lazy.reserved_bytes
    assert "CUDA_MODULE_LOADING=EAGER" in next(p.source for p in eager.breakdown if p.key == "cuda_context")
