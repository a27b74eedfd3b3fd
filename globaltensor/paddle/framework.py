"""Paddle's framework names: places, the device, stop_gradient, DataParallel with Paddle's arguments."""
from .. import autograd as _autograd
from ..data_parallel import DataParallel as _DataParallel

_device = ["cpu"]


class CPUPlace:
    """paddle.CPUPlace(): pieces on the host."""

    type = "cpu"

    def __repr__(self):
        return "Place(cpu)"

    def __eq__(self, other):
        return isinstance(other, CPUPlace)

    def __hash__(self):
        return hash("cpu")


class CUDAPlace:
    """paddle.CUDAPlace(i): pieces on this rank's GPU (each rank uses its own; i is kept for repr)."""

    type = "cuda"

    def __init__(self, index=0):
        self.index = index

    def __repr__(self):
        return f"Place(gpu:{self.index})"

    def __eq__(self, other):
        return isinstance(other, CUDAPlace) and other.index == self.index

    def __hash__(self):
        return hash(("cuda", self.index))


def set_device(device):
    """paddle.set_device("cpu" | "gpu" | "gpu:0"): the placement type of meshes made after it."""
    kind = str(device).split(":")[0]
    if kind not in ("cpu", "gpu", "cuda"):
        raise ValueError(f"set_device: unknown device {device!r}; use 'cpu' or 'gpu'")
    _device[0] = "cpu" if kind == "cpu" else "cuda"
    return device


def get_device():
    return "cpu" if _device[0] == "cpu" else "gpu:0"


def device_type():
    """The placement type Paddle's meshes get ("cpu" unless set_device chose the GPU)."""
    return _device[0]


def is_grad_enabled():
    return _autograd.is_grad_enabled()


def _get_stop_gradient(t):
    return not t.requires_grad


def _set_stop_gradient(t, value):
    t.requires_grad_(not value)
    if not value:
        _autograd.seeds_ones(t)  # a leaf made trainable through Paddle's name follows Paddle's backward rule


stop_gradient_property = property(_get_stop_gradient, _set_stop_gradient,
                                  doc="Paddle's name for `not requires_grad` (True: no gradient flows to it)")


class DataParallel(_DataParallel):
    """paddle.DataParallel(layers, strategy=None, comm_buffer_size=25, last_comm_buffer_size=1,
    find_unused_parameters=False): gt.distributed.DataParallel with Paddle's arguments; the Layer
    methods Paddle users call on it (state_dict, set_state_dict, train, eval) are the wrapped layer's."""

    def __init__(self, layers, strategy=None, comm_buffer_size=25, last_comm_buffer_size=1,
                 find_unused_parameters=False, group=None):
        super().__init__(layers, comm_buffer_size=comm_buffer_size, last_comm_buffer_size=last_comm_buffer_size,
                         find_unused_parameters=find_unused_parameters)

