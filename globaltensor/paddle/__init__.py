"""Paddle's face: `import globaltensor.paddle as paddle` runs Paddle code on globaltensor (SPEC §10).

A thin layer of aliases and adapters over the runtime, one module per Paddle namespace. Every op of
globaltensor is here under its name (Paddle's keyword spellings accepted: x=, y=, axis=, shape=);
where Paddle's positional meaning differs from PyTorch's (shape-first factories, `split`'s number
of sections, `max` returning values, `transpose`'s permutation, `sum`'s dtype before keepdim,
`matmul`'s transpose flags, `gelu`'s bool approximate) the function here is Paddle's.
"""
from ..distributed.launcher_mode import surface_package as _surface_package


def _all_names(namespace):
    namespace["__all__"] = sorted(n for n in namespace if not n.startswith("_"))


def _load_surface():
    """Every name of paddle (paddle/_surface.py)."""
    from . import _surface
    return _surface


__getattr__ = _surface_package(globals(), _load_surface, _all_names)
