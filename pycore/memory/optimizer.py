"""Optimizer state kept per parameter, and the temporaries of the optimizer step.

States per parameter: Adam/AdamW keep exp_avg and exp_avg_sq (Kingma & Ba 2015); SGD with momentum
one buffer; Lion one (Chen et al. 2023); Adafactor factored row and column statistics (Shazeer & Stern
2018, about rows + columns per matrix, here 1% of the parameters as an upper bound for square-ish
matrices); bitsandbytes 8-bit Adam two uint8 states plus one fp32 absmax per 2048-element block.

The step's temporaries depend on the kernel that runs it (``KERNELS``), measured on torch 2.13 in
validation/measured_optimizer.json (validation/measure_optimizer.py, exact to the byte):

- ``foreach`` (torch.optim's default on CUDA when neither foreach nor fused is given) allocates a
  temporary for every parameter at once: Adam's ``torch._foreach_sqrt(exp_avg_sqs)`` (torch/optim/adam.py
  L762 in torch 2.13.0), Adafactor's full-size variance estimates, lion-pytorch's ``exp_avg.clone()`` list.
- ``fused`` (fused=True; Hugging Face Trainer's default ``adamw_torch_fused``, torchtitan, torchtune)
  updates in place: ``torch._fused_adamw_`` (adam.py L877) allocates nothing, on CPU as on CUDA.
- ``for-loop`` (foreach=False, fused=False: torch's single-tensor path, its default on CPU) allocates per
  tensor, so its peak follows the largest tensor: Adam's ``denom = (exp_avg_sq.sqrt() / bc2).add_(eps)``
  (adam.py L544) holds two tensors of that size, and ``denom`` of the tensor before it is still alive
  while they are computed, so the peak is max over i of 2·n_i + n_(i-1).
"""

STATES = {"adamw": 2, "adam": 2, "adam-8bit": 2, "sgd": 0, "sgd-momentum": 1, "adafactor": 0.01, "lion": 1}

KERNELS = ("foreach", "fused", "for-loop")

# foreach: temporaries in parameter-sized tensors of the state dtype, allocated for every parameter at
# once (measured: 1.000·params for AdamW, Adam, Adafactor and lion-pytorch's foreach Lion; 0 for SGD,
# which updates in place). bitsandbytes' 8-bit Adam has no foreach path: it calls one in-place CUDA kernel
# per tensor (bitsandbytes/optim/optimizer.py, Optimizer2State.update_step ->
# F.optimizer_update_8bit_blockwise), so it allocates nothing whichever kernel is asked for.
STEP_TEMPORARIES = {"adamw": 1, "adam": 1, "adam-8bit": 0, "sgd": 0, "sgd-momentum": 0, "adafactor": 1,
                    "lion": 1}

# for-loop: (tensors the size of the largest one, tensors the size of the one before it) alive at the
# peak, measured. Adam/AdamW: sqrt and the quotient, plus the previous denom (2, 1); with Adam's coupled
# weight_decay > 0 (not torch's default) grad.add(param) adds one more (3, 1: adam.py L428). Adafactor's
# row_var @ col_var estimate (torch/optim/_adafactor.py L402), plus the previous one (1, 1). lion-pytorch's
# exp_avg.clone().mul_().add() (2, 0: a function's locals, freed before the next tensor). SGD: in place.
FOR_LOOP_TEMPORARIES = {"adamw": (2, 1), "adam": (2, 1), "adam-8bit": (0, 0), "sgd": (0, 0),
                        "sgd-momentum": (0, 0), "adafactor": (1, 1), "lion": (2, 0)}

# fused: nothing for the kernels that exist (torch's _fused_adam(w)_ and _fused_sgd_, measured; Lion's
# Triton kernel in lion-pytorch, in place by its source). torch.optim.Adafactor has no fused argument,
# so a fused request for it runs as its for-loop.
NO_FUSED_KERNEL = {"adafactor"}


def state_bytes(name: str, params: int, state_bytes_per_element: float) -> int:
    """Bytes of optimizer state for ``params`` parameters."""
    if name == "adam-8bit":
        return 2 * params + 2 * 4 * -(-params // 2048)
    return round(STATES[name] * params * state_bytes_per_element)


def step_temporary_bytes(name: str, params: int, state_bytes_per_element: float, kernel: str = "foreach", largest_tensor: int = 0,
                         preceding_tensor: int = 0) -> float:
    """Bytes the optimizer step allocates on top of parameters, gradients and state, at its peak.

    Args:
        name: optimizer (a key of ``STATES``).
        params: parameters the optimizer updates (on this GPU).
        state_bytes_per_element: bytes per element of the optimizer state (its temporaries share the dtype).
        kernel: one of ``KERNELS``.
        largest_tensor: elements of the largest single parameter tensor; for-loop only. 0 (unknown)
            counts all parameters as one tensor, an upper bound.
        preceding_tensor: elements of the parameter tensor updated just before the largest one (0 when the
            largest comes first, as an embedding does); for-loop only. The exact peak is the largest
            ``a·n_i + b·n_(i-1)`` over consecutive tensors, so pass the pair that maximises it when two
            large tensors sit side by side (gate_proj and up_proj).
    Returns:
        bytes, rounded to a whole number.
    """
    if kernel not in KERNELS:
        raise ValueError(f"unknown optimizer kernel {kernel!r}; expected one of {', '.join(KERNELS)}")
    if kernel == "fused" and name not in NO_FUSED_KERNEL:
        return 0
    if kernel == "foreach":
        return round(STEP_TEMPORARIES[name] * params * state_bytes_per_element)
    largest, preceding = FOR_LOOP_TEMPORARIES[name]
    tensor = min(largest_tensor or params, params)
    return round((largest * tensor + preceding * min(preceding_tensor, params - tensor))
                 * state_bytes_per_element)
