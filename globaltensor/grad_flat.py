"""A bucket's flat gradient buffer: the gradient pieces of its leaves side by side in one array,
kept from step to step, and the copies into it of the pieces backward did not write in place."""
import math
import sys
import weakref

import numpy as np

from .backends.devices import of_array


class FlatBuffer:
    """A bucket's gradient pieces side by side in one array (shared memory on cpu, GPU memory on
    cuda), kept from step to step: backward writes a leaf's gradient straight into its view and
    the all_reduce runs in place (no packing copy, no fresh pages). Reused only while nobody else
    holds a view of it."""

    def __init__(self, dev, shapes, dtype, leaves=()):
        self.cuts, start = [], 0  # (start, stop, shape) of each piece in the flat array
        for shape in shapes:
            n = math.prod(shape)
            self.cuts.append((start, start + n, tuple(shape)))
            start += n
        self.flat = dev.empty((start,), dtype)
        self.views = [self.flat[a:b].reshape(shape) for a, b, shape in self.cuts]
        self.index = {id(leaf): j for j, leaf in enumerate(leaves)}
        self._leaves = [weakref.ref(leaf) for leaf in leaves]
        self._owner = self.flat if self.flat.base is None else self.flat.base  # every view refers to it
        self._baseline = sys.getrefcount(self._owner)

    @classmethod
    def of_leaves(cls, leaves):
        """The buffer of these leaves' gradient pieces (their local shapes and dtype)."""
        first = leaves[0]._local
        return cls(of_array(first), [leaf._local.shape for leaf in leaves], first.dtype, leaves)

    def in_use(self):
        """True while a view handed out earlier (a .grad, a user's slice of one) is still alive."""
        return sys.getrefcount(self._owner) > self._baseline

    def alive(self):
        return all(ref() is not None for ref in self._leaves)


_flat_cache = {}  # (leaf ids, local shapes, dtype) -> FlatBuffer


def flat_buffers(plan):
    """One FlatBuffer per bucket of the plan: the cached one when free, else a new one."""
    flats = []
    for bucket in plan:
        key = (tuple(id(leaf) for leaf in bucket), tuple(leaf._local.shape for leaf in bucket),
               bucket[0]._local.dtype.str)
        flat = _flat_cache.get(key)
        if flat is None or flat.in_use() or not flat.alive():
            if flat is None and len(_flat_cache) >= 64:  # leaves of models gone: forget their buffers
                for k in [k for k, v in _flat_cache.items() if not v.alive()]:
                    del _flat_cache[k]
            flat = _flat_cache[key] = FlatBuffer.of_leaves(bucket)
        flats.append(flat)
    return flats


copies = [0]  # gradient pieces fill() copied into a FlatBuffer (the others backward wrote in place)


def fill(flat, pieces):
    """Copy each gradient piece ({id(leaf): array}) into its view of the FlatBuffer, unless
    backward wrote it there already."""
    for key, piece in pieces.items():
        view = flat.views[flat.index[key]]
        if piece is not view:
            np.copyto(view, piece)
            copies[0] += 1
    return flat.flat
