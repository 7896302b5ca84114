"""pycore: GPU memory per device for training and serving transformers. Standard library only."""

from pycore.base.errors import FieldError, InputError
from pycore.inputs.schema import parse
from pycore.memory.estimate import estimate, estimate_values

__all__ = ["estimate", "estimate_values", "parse", "FieldError", "InputError"]
__version__ = "0.2.0"
