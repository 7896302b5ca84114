"""pycore: GPU memory per device for training and serving transformers. Standard library only."""

from .estimate import estimate, estimate_values
from .schema import InputError, parse

__all__ = ["estimate", "estimate_values", "parse", "InputError"]
__version__ = "0.1.0"
