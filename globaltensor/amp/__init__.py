"""gt.amp: autocast (op lists as data, context-local) and GradScaler, PyTorch's torch.amp."""
from .autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled
from .grad_scaler import GradScaler, StaticGradScaler

__all__ = ["autocast", "GradScaler", "StaticGradScaler", "is_autocast_enabled", "get_autocast_dtype"]
