"""paddle.base.framework: the parameter class and mode queries Paddle's user code checks against."""
from .. import static as _static
from ..nn.parameter import EagerParamBase

__all__ = ["EagerParamBase", "in_dygraph_mode"]


def in_dygraph_mode():
    """Paddle's older name of in_dynamic_mode: True outside static mode."""
    return not _static.STATIC[0]
