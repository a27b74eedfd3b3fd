"""globaltensor: global tensors with eager execution (see SPEC.md for the contract)."""
from . import distributed, env

__version__ = "0.1.0"

__all__ = ["distributed", "env", "__version__"]
