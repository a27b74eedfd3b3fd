"""Paddle's face: `import globaltensor.paddle as paddle` runs Paddle code on globaltensor (SPEC §10).

A thin layer of aliases and adapters over the runtime, one module per Paddle namespace. Every op of
globaltensor is here under its name (Paddle's keyword spellings accepted: x=, y=, axis=, shape=);
where Paddle's positional meaning differs from PyTorch's (shape-first factories, `split`'s number
of sections, `max` returning values, `transpose`'s permutation, `sum`'s dtype before keepdim,
`matmul`'s transpose flags, `gelu`'s bool approximate) the function here is Paddle's.
"""
from ..distributed.launcher_mode import adopt as _adopt, load_deferred as _load_deferred, \
    load_or_defer as _load_or_defer


def _load_surface():
    """Every name of paddle (paddle/_surface.py): at import, or in a launcher process on first use."""
    from . import _surface
    _adopt(globals(), _surface)
    globals()["__all__"] = sorted(n for n in globals() if not n.startswith("_"))


def __getattr__(name):
    """In a launcher process (distributed/launcher_mode.py) the first name used loads the deferred packages."""
    if _load_deferred(__file__, name) and name in globals():
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_load_or_defer(_load_surface)
