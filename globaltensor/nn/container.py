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


class Positional(Module):
    """Entries by position, registered as "0", "1", ... in the table `_entries` names (ModuleList's
    modules, ParameterList's parameters)."""

    _entries = "_modules"

    def __getitem__(self, i):
        return list(getattr(self, self._entries).values())[i]

    def __iter__(self):
        return iter(getattr(self, self._entries).values())

    def __len__(self):
        return len(getattr(self, self._entries))


class ParameterList(Positional):
    """Parameters by position, registered as "0", "1", ..."""

    _entries = "_parameters"

    def __init__(self, parameters=()):
        super().__init__()
        for p in parameters:
            self.append(p)

    def append(self, p):
        self.register_parameter(str(len(self._parameters)), p if isinstance(p, Parameter) else Parameter(p))
        return self
