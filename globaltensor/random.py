"""Sharding-invariant random numbers: values depend on (generator seed, its counter, global index) only.

A `Generator` is a seed and a counter (OneFlow's/PyTorch's offset). Every random factory call
takes its generator's next counter (the same on every rank, since every rank makes the same
calls) and asks Philox4x32-10 for the elements of its own piece, so a global tensor has the
same values whatever its placement, SBP or number of ranks, and a one-process run reproduces
a multi-process one. Two generators with the same seed give the same stream; `default_generator`
is the one factories use when given none (the only process-wide state here, as in PyTorch).
"""
import os

from . import _C

DEFAULT_SEED = 67280421310721
UNIFORM, NORMAL, RANDINT, BERNOULLI = (_C.RandomKind.uniform, _C.RandomKind.normal, _C.RandomKind.randint,
                                      _C.RandomKind.bernoulli)  # kernels/philox.h's numbering
_STATE_BYTES = 16  # a state tensor: seed then counter, each a little-endian uint64


def _checked_seed(seed):
    seed = int(seed)
    if not -2 ** 63 <= seed < 2 ** 64:
        raise ValueError(f"seed must be in [-2**63, 2**64), got {seed}")
    return seed % 2 ** 64  # PyTorch takes a negative seed as its two's complement


class Generator:
    """A seed and a counter: `Generator(device="cpu")`, as torch.Generator / flow.Generator."""

    def __init__(self, device="cpu"):
        from .tensor import device as _device
        self.device = device if isinstance(device, _device) else _device(device or "cpu")
        self._seed, self._counter = DEFAULT_SEED, 0

    def manual_seed(self, seed):
        """Seed this generator (every rank with the same seed) and restart its counter; returns self."""
        self._seed, self._counter = _checked_seed(seed), 0
        return self

    def seed(self):
        """A fresh non-deterministic seed (from the OS), set and returned; ranks must agree themselves."""
        self.manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
        return self._seed

    def initial_seed(self):
        return self._seed

    def get_state(self):
        """A uint8 tensor (a ByteTensor, as PyTorch) holding the seed and the counter."""
        import numpy as np
        from .creation import tensor
        raw = self._seed.to_bytes(8, "little") + self._counter.to_bytes(8, "little")
        return tensor(np.frombuffer(raw, np.uint8).copy(), dtype="uint8")

    def set_state(self, new_state):
        """Restore what get_state returned (a uint8 tensor; a (seed, counter) pair is taken too)."""
        self._seed, self._counter = _unpack(new_state)
        return self

    def next_counter(self):
        """The counter for one draw; every rank must call it the same number of times."""
        counter = self._counter
        self._counter = counter + 1
        return counter

    def __repr__(self):
        return f"<globaltensor.Generator device={self.device}>"


def _unpack(state):
    if isinstance(state, (tuple, list)) and len(state) == 2:
        return _checked_seed(state[0]), int(state[1])
    import numpy as np
    raw = np.asarray(state.numpy() if hasattr(state, "numpy") else state)
    if raw.dtype != np.uint8 or raw.shape != (_STATE_BYTES,):
        raise ValueError(f"a generator state is a uint8 tensor of shape ({_STATE_BYTES},), got dtype {raw.dtype} "
                         f"shape {tuple(raw.shape)}")
    raw = raw.tobytes()
    return int.from_bytes(raw[:8], "little"), int.from_bytes(raw[8:], "little")


default_generator = Generator()


def _generator(generator):
    if generator is None:
        return default_generator
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be a globaltensor.Generator, got {type(generator).__name__}")
    return generator


def manual_seed(seed):
    """Seed the default generator (on every rank, with the same seed); returns it, as PyTorch."""
    return default_generator.manual_seed(seed)


def seed():
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()


def get_rng_state():
    """The default generator's state as a uint8 tensor (torch.get_rng_state)."""
    return default_generator.get_state()


def set_rng_state(state):
    default_generator.set_state(state)


def next_key(generator=None):
    """(seed, counter) of one draw from `generator` (the default one if None)."""
    g = _generator(generator)
    return g._seed, g.next_counter()


def next_counter(generator=None):
    """The counter of one draw; pass it with the same generator's seed to fill (kept for callers of the
    default stream: a data loader's shuffle, a pipeline's step key)."""
    return _generator(generator).next_counter()


def fill(out, kind, global_shape, starts, counter, a=0.0, b=1.0, seed=None):
    """Write into `out` (a piece starting at `starts`, in its own dtype) the values of the draw `counter`
    of the stream `seed` (the default generator's if None)."""
    seed = default_generator._seed if seed is None else seed
    _C.philox_fill(out, kind, list(global_shape), list(starts), seed, counter, float(a), float(b))
