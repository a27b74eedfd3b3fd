"""Argument helpers of nn.modules.utils: _single, _pair, _triple, _quadruple, _ntuple."""
import collections.abc
from itertools import repeat


def _ntuple(n):
    """A function making an n-tuple of an int (or passing an iterable through as a tuple)."""
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(repeat(x, n))
    return parse


_single, _pair, _triple, _quadruple = _ntuple(1), _ntuple(2), _ntuple(3), _ntuple(4)


def _reverse_repeat_tuple(t, n):
    """(a, b) -> (b, b, a, a) for n = 2: a pad argument from per-dim sizes, last dim first."""
    return tuple(x for x in reversed(t) for _ in range(n))
