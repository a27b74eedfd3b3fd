"""Containers keyed by name or position: ModuleDict, ParameterList."""
from .module import Module, Parameter

__all__ = ["ModuleDict", "ParameterList"]


class ModuleDict(Module):
    """Modules by name, registered (their parameters are the dict's), in insertion order."""

    def __init__(self, modules=None):
        super().__init__()
        for name, m in (modules.items() if isinstance(modules, dict) else (modules or ())):
            self[name] = m

    def __setitem__(self, name, module):
        self.add_module(str(name), module)

    def __getitem__(self, name):
        return self._modules[name]

    def __delitem__(self, name):
        del self._modules[name]

    def __contains__(self, name):
        return name in self._modules

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()


class ParameterList(Module):
    """Parameters by position, registered as "0", "1", ..."""

    def __init__(self, parameters=()):
        super().__init__()
        for p in parameters:
            self.append(p)

    def append(self, p):
        self.register_parameter(str(len(self._parameters)), p if isinstance(p, Parameter) else Parameter(p))
        return self

    def __getitem__(self, i):
        return list(self._parameters.values())[i]

    def __iter__(self):
        return iter(self._parameters.values())

    def __len__(self):
        return len(self._parameters)
