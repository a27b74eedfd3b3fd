"""Sharding-invariant random numbers: values depend on (stream seed, its counter, global index) only.

A `Stream` is a seed and a counter (OneFlow's/PyTorch's offset); `gt.Generator` (generator.py) is
one with PyTorch's tensor-facing API. Every random factory call takes its stream's next counter
(the same on every rank, since every rank makes the same calls) and asks Philox4x32-10 for the
elements of its own piece, so a global tensor has the same values whatever its placement, SBP or
number of ranks, and a one-process run reproduces a multi-process one. Two streams with one seed
give one sequence; `default_stream` (gt.default_generator's) is the only process-wide one.
"""
import os

from . import _native

DEFAULT_SEED = 67280421310721
UNIFORM, NORMAL, RANDINT, BERNOULLI = (_native.RandomKind.uniform, _native.RandomKind.normal, _native.RandomKind.randint,
                                      _native.RandomKind.bernoulli)  # kernels/philox.h's numbering


def checked_seed(seed):
    """An int seed in [0, 2**64): a negative one is taken as its two's complement, as PyTorch."""
    seed = int(seed)
    if not -2 ** 63 <= seed < 2 ** 64:
        raise ValueError(f"seed must be in [-2**63, 2**64), got {seed}")
    return seed % 2 ** 64


class Stream:
    """A seed and a counter: the state of one generator."""

    __slots__ = ("seed", "counter")

    def __init__(self, seed=DEFAULT_SEED):
        self.seed, self.counter = seed, 0

    def manual_seed(self, seed):
        """Seed this stream (every rank with the same seed) and restart its counter."""
        self.seed, self.counter = checked_seed(seed), 0

    def fresh_seed(self):
        """A non-deterministic seed (from the OS), set and returned; ranks must agree themselves."""
        self.manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
        return self.seed

    def next_counter(self):
        """The counter for one draw; every rank must call it the same number of times."""
        counter = self.counter
        self.counter = counter + 1
        return counter


default_stream = Stream()


def _stream(generator):
    if generator is None:
        return default_stream
    stream = getattr(generator, "_stream", None)
    if not isinstance(stream, Stream):
        raise TypeError(f"generator must be a globaltensor.Generator, got {type(generator).__name__}")
    return stream


def manual_seed(seed):
    """Seed the default stream (on every rank, with the same seed) and restart its counter."""
    default_stream.manual_seed(seed)


def initial_seed():
    return default_stream.seed


def get_rng_state():
    """The default stream as (seed, counter): the internal form (gt.get_rng_state gives PyTorch's tensor)."""
    return (default_stream.seed, default_stream.counter)


def set_rng_state(state):
    default_stream.seed, default_stream.counter = checked_seed(state[0]), int(state[1])


def next_key(generator=None):
    """(seed, counter) of one draw from `generator` (a gt.Generator; the default stream if None)."""
    stream = _stream(generator)
    return stream.seed, stream.next_counter()


def next_counter():
    """The counter of one draw of the default stream (a data loader's shuffle, a pipeline's step key)."""
    return default_stream.next_counter()


def draw_spec(shape, dt, placement, sbp, kind, a, b, device, generator):
    """A factory's draw from the default stream as data (a graph's saved program rebuilds it,
    graph/rebuild.py); None for a draw from a generator of its own."""
    if generator is not None:
        return None
    return {"draw": "philox", "shape": tuple(shape), "dtype": dt, "placement": placement, "sbp": sbp,
            "kind": int(kind), "a": a, "b": b, "device": None if device is None else str(device)}


def fill(out, kind, global_shape, starts, counter, a=0.0, b=1.0, seed=None):
    """Write into `out` (a piece starting at `starts`, in its own dtype) the values of the draw `counter`
    of the stream `seed` (the default stream's if None)."""
    seed = default_stream.seed if seed is None else seed
    _native.philox_fill(out, kind, list(global_shape), list(starts), seed, counter, float(a), float(b))
