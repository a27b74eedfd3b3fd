"""gt.Generator (torch.Generator / flow.Generator): a random stream with PyTorch's tensor-facing API."""
import numpy as np

from . import random as _random
from .creation import tensor
from .tensor import device as _device

_STATE_BYTES = 16  # a state tensor: the seed then the counter, each a little-endian uint64


class Generator:
    """`Generator(device="cpu")`: manual_seed(s) (returns self), seed(), initial_seed(),
    get_state()/set_state() (a uint8 tensor), device. Draws from it (generator= on every random
    factory and op) depend only on its seed and counter: the same on every rank and layout."""

    def __init__(self, device="cpu", *, _stream=None):
        self.device = device if isinstance(device, _device) else _device(device or "cpu")
        self._stream = _stream if _stream is not None else _random.Stream()

    def manual_seed(self, seed):
        self._stream.manual_seed(seed)
        return self

    def seed(self):
        """A fresh non-deterministic seed (from the OS), set and returned; ranks must agree themselves."""
        return self._stream.fresh_seed()

    def initial_seed(self):
        return self._stream.seed

    def get_state(self):
        """A uint8 tensor (a ByteTensor, as PyTorch's) holding the seed and the counter."""
        raw = self._stream.seed.to_bytes(8, "little") + self._stream.counter.to_bytes(8, "little")
        return tensor(np.frombuffer(raw, np.uint8).copy(), dtype="uint8")

    def set_state(self, new_state):
        """Restore what get_state returned (a (seed, counter) pair is taken too)."""
        self._stream.seed, self._stream.counter = _unpack(new_state)
        return self

    def __repr__(self):
        return f"<globaltensor.Generator device={self.device}>"


def _unpack(state):
    if isinstance(state, (tuple, list)) and len(state) == 2:
        return _random.checked_seed(state[0]), int(state[1])
    raw = np.asarray(state.numpy() if hasattr(state, "numpy") else state)
    if raw.dtype != np.uint8 or raw.shape != (_STATE_BYTES,):
        raise ValueError(f"a generator state is a uint8 tensor of shape ({_STATE_BYTES},), got dtype {raw.dtype} "
                         f"shape {tuple(raw.shape)}")
    raw = raw.tobytes()
    return int.from_bytes(raw[:8], "little"), int.from_bytes(raw[8:], "little")


default_generator = Generator(_stream=_random.default_stream)  # the factories' stream when given none


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


def set_rng_state(new_state):
    default_generator.set_state(new_state)
