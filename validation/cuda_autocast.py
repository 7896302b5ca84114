"""CUDA autocast's casting rules for CPU tensors, so a CPU measurement allocates what a GPU run would.

Dev-only (needs torch). ``torch.autocast("cpu")`` and ``torch.autocast("cuda")`` cast different op
lists. In aten/src/ATen/autocast_mode.cpp (pytorch/pytorch; torch 2.13 keeps the same lists) CUDA
registers ``AT_FORALL_FP32`` (pow, rsqrt, exp, log, layer_norm, nll_loss, ...) with the ``fp32`` policy
and ``AT_FORALL_FP32_SET_OPT_DTYPE`` (softmax, log_softmax, sum, cumsum, prod, ...) with
``fp32_set_opt_dtype``; AutocastCPU registers neither list (its fp32 list is linear algebra, FFTs,
pooling and losses), so on the CPU ``pow``, ``softmax`` or ``layer_norm`` of a bf16 tensor stay bf16
and save 2-byte activations that CUDA saves in fp32. (Checked on torch 2.13.0+cpu: under
``torch.autocast("cpu", torch.bfloat16)`` all of pow, softmax, log_softmax, layer_norm, rsqrt, exp and
sum of a bf16 tensor return bf16.)

``cuda_autocast()`` registers Python kernels on the AutocastCPU dispatch key for CUDA's lists, which
cast as CUDA's wrappers do (every floating, non-double tensor argument to fp32; or, for the
set_opt_dtype ops, ``dtype=torch.float32`` when the first argument is eligible and no dtype was
given), and restores PyTorch's own kernels on exit. Ops AutocastCPU runs in fp32 and CUDA does not
(``cross_entropy_loss``) fall through to their decomposition, as on CUDA. Autocast sits above the
Autograd and Python dispatch keys, so the casts are recorded by autograd and seen by MemTracker.

Not reproduced: CUDA's ``softmax`` of an fp16 input with dtype=float runs ``_softmax(half_to_float)``
without an fp32 copy of its input; the CPU makes that copy (a transient, freed at once; bf16 inputs
are copied on CUDA too).
"""

import contextlib
import warnings

import torch

# CUDA's fp32 policy (AT_FORALL_FP32): every eligible tensor argument is cast to fp32.
CUDA_FP32 = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt",
    "sinh", "tan", "pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar", "softplus", "layer_norm",
    "native_layer_norm", "group_norm", "frobenius_norm.dim", "nuclear_norm", "nuclear_norm.dim",
    "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d",
    "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss",
    "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss",
    "multi_margin_loss", "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
)

# CUDA's fp32_set_opt_dtype policy (AT_FORALL_FP32_SET_OPT_DTYPE): dtype=float32 unless one is given.
CUDA_FP32_SET_OPT_DTYPE = (
    "prod", "prod.dim_int", "softmax.int", "log_softmax.int", "cumprod", "cumsum", "linalg_vector_norm",
    "linalg_matrix_norm", "linalg_matrix_norm.str_ord", "sum", "sum.dim_IntList",
)

# AutocastCPU casts these to fp32 and AutocastCUDA registers nothing for them (a fallthrough).
CPU_ONLY_FP32 = ("cross_entropy_loss",)

_NO_AUTOCAST = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)


def _overload(name):
    base, _, overload = name.partition(".")
    packet = getattr(torch.ops.aten, base)
    return getattr(packet, overload or "default")


def _eligible(value):
    return isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != torch.float64


def _to_fp32(value):
    if _eligible(value):
        return value.float()
    if isinstance(value, (list, tuple)):
        return type(value)(_to_fp32(v) for v in value)
    return value


def _fp32_kernel(op):
    def kernel(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_NO_AUTOCAST):
            return op(*_to_fp32(args), **{k: _to_fp32(v) for k, v in kwargs.items()})
    return kernel


def _set_opt_dtype_kernel(op):
    names = [a.name for a in op._schema.arguments]
    position = names.index("dtype")

    def kernel(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_NO_AUTOCAST):
            if not (args and _eligible(args[0])):
                return op(*args, **kwargs)
            if len(args) > position:
                if args[position] is None:
                    args = (*args[:position], torch.float32, *args[position + 1:])
            elif kwargs.get("dtype") is None:
                kwargs = {**kwargs, "dtype": torch.float32}
            return op(*args, **kwargs)
    return kernel


def _fallthrough_kernel(op):
    def kernel(*args, **kwargs):
        # The composite kernel, with autocast still on for the ops it calls (CUDA's fallthrough).
        return op.decompose(*args, **kwargs)
    return kernel


@contextlib.contextmanager
def cuda_autocast(enabled=True):
    """While active, autocast("cpu") casts as autocast("cuda") would. enabled=False: a no-op."""
    if not enabled:
        yield
        return
    library = torch.library.Library("aten", "IMPL")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # "Overriding a previously registered kernel"
            for name in CUDA_FP32:
                library.impl(name, _fp32_kernel(_overload(name)), "AutocastCPU")
            for name in CUDA_FP32_SET_OPT_DTYPE:
                library.impl(name, _set_opt_dtype_kernel(_overload(name)), "AutocastCPU")
            for name in CPU_ONLY_FP32:
                library.impl(name, _fallthrough_kernel(_overload(name)), "AutocastCPU")
        yield
    finally:
        library._destroy()
