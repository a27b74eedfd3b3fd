"""Sharding-invariant random numbers: values depend on (seed, call counter, global index) only.

Every random factory call takes the next counter (the same on every rank, since every rank
makes the same calls) and asks Philox4x32-10 for the elements of its own piece, so a global
tensor has the same values whatever its placement, SBP or number of ranks, and a
one-process run reproduces a multi-process one.
"""
from . import _C

DEFAULT_SEED = 67280421310721
UNIFORM, NORMAL, RANDINT, BERNOULLI = (_C.RandomKind.uniform, _C.RandomKind.normal, _C.RandomKind.randint,
                                      _C.RandomKind.bernoulli)  # kernels/philox.h's numbering
_state = {"seed": DEFAULT_SEED, "counter": 0}


def manual_seed(seed):
    """Seed the generator (on every rank, with the same seed) and restart its counter."""
    seed = int(seed)
    if not 0 <= seed < 2 ** 64:
        raise ValueError(f"seed must be in [0, 2**64), got {seed}")
    _state["seed"], _state["counter"] = seed, 0


def initial_seed():
    return _state["seed"]


def get_rng_state():
    return (_state["seed"], _state["counter"])


def set_rng_state(state):
    _state["seed"], _state["counter"] = int(state[0]), int(state[1])


def next_counter():
    """The counter for one factory call; every rank must call it the same number of times."""
    counter = _state["counter"]
    _state["counter"] = counter + 1
    return counter


def fill(out, kind, global_shape, starts, counter, a=0.0, b=1.0):
    """Write into `out` (a piece starting at `starts`, in its own dtype) the values of the call `counter`."""
    _C.philox_fill(out, kind, list(global_shape), list(starts), _state["seed"], counter, float(a), float(b))
