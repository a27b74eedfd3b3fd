"""`torch` imported on first use, so the rank processes of a test module that never touch it skip its import."""
import importlib


class LazyModule:
    """Stands for a module and imports it at the first attribute read (torch takes ~1.5 s to import)."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self):
        return f"<module {self._name!r}, imported on first use>"


torch = LazyModule("torch")
torch_functional = LazyModule("torch.nn.functional")
