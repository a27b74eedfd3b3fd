"""paddle.amp: auto_cast (O1/O2 lists), decorate (O2 parameters, float32 master weights), GradScaler."""
from .auto_cast import amp_guard, auto_cast, decorate, is_bfloat16_supported, is_float16_supported
from .grad_scaler import AmpScaler, GradScaler

__all__ = ["auto_cast", "amp_guard", "decorate", "GradScaler", "AmpScaler", "is_float16_supported",
           "is_bfloat16_supported"]
