"""Optimizer state kept per parameter, and the temporaries of the optimizer step.

States per parameter: Adam/AdamW keep exp_avg and exp_avg_sq (Kingma & Ba 2015); SGD with momentum
one buffer; Lion one (Chen et al. 2023); Adafactor factored row and column statistics (Shazeer & Stern
2018, about rows + columns per matrix, here 1% of the parameters as an upper bound for square-ish
matrices); bitsandbytes 8-bit Adam two uint8 states plus one fp32 absmax per 2048-element block.
"""

STATES = {"adamw": 2, "adam": 2, "adam-8bit": 2, "sgd": 0, "sgd-momentum": 1, "adafactor": 0.01, "lion": 1}

# Step temporaries of PyTorch's foreach implementations (the CUDA default), in parameter-sized tensors
# of the state dtype: Adam's _multi_tensor_adam allocates torch._foreach_sqrt(exp_avg_sqs) for every
# parameter at once; SGD and Lion update in place.
STEP_TEMPORARIES = {"adamw": 1, "adam": 1, "adam-8bit": 0, "sgd": 0, "sgd-momentum": 0, "adafactor": 1,
                    "lion": 1}


def state_bytes(name, params, state_bytes_per_element):
    """Bytes of optimizer state for ``params`` parameters."""
    if name == "adam-8bit":
        return 2 * params + 2 * 4 * -(-params // 2048)
    return round(STATES[name] * params * state_bytes_per_element)


def step_temporary_bytes(name, params, state_bytes_per_element):
    """Bytes the optimizer step allocates on top of its state, at its peak."""
    return round(STEP_TEMPORARIES[name] * params * state_bytes_per_element)
