"""flow.set_printoptions and flow.is_tensor: PyTorch's and OneFlow's top-level helpers for showing and recognising tensors."""
import sys

import numpy as np

from .tensor import Tensor

# PyTorch's (and OneFlow's) profiles: precision, threshold, edgeitems, linewidth
_PROFILES = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80), "full": (4, sys.maxsize, 3, 80)}


def is_tensor(obj):
    """Whether obj is a tensor (local or global), as torch.is_tensor."""
    return isinstance(obj, Tensor)


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """How tensors print (a tensor's values print through numpy, so numpy's options change with them)."""
    options = {}
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be one of {sorted(_PROFILES)}, got {profile!r}")
        options = dict(zip(("precision", "threshold", "edgeitems", "linewidth"), _PROFILES[profile]))
    given = {"precision": precision, "threshold": threshold, "edgeitems": edgeitems, "linewidth": linewidth}
    options.update({k: v for k, v in given.items() if v is not None})
    if options.get("threshold") == float("inf"):
        options["threshold"] = sys.maxsize
    if sci_mode is not None:
        options["suppress"] = not sci_mode
    np.set_printoptions(**options)
