"""pycore: GPU memory per device for training and serving transformers. Standard library only."""

from .errors import FieldError, InputError
from .estimate import estimate, estimate_values
from .schema import parse

__all__ = ["estimate", "estimate_values", "parse", "FieldError", "InputError"]
__version__ = "0.2.0"
