"""paddle.base.core: the few C++-side names Paddle's user code touches (device contexts, build queries)."""
from ..toplevel import is_compiled_with_cuda, is_compiled_with_xpu

__all__ = ["DeviceContext", "is_compiled_with_cuda", "is_compiled_with_xpu"]


class DeviceContext:
    """The context of one place: globaltensor keeps no per-device state in it, so it only names the
    place (Paddle's scripts create one before their first op and never use it further)."""

    def __init__(self, place):
        self.place = place

    @staticmethod
    def create(place):
        if place is None:
            raise TypeError("DeviceContext.create: expected a place (paddle.CPUPlace() or paddle.CUDAPlace(i)), got None")
        return DeviceContext(place)

    def get_place(self):
        return self.place

    def __repr__(self):
        return f"DeviceContext({self.place})"
