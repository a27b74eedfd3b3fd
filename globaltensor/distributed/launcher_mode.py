"""Whether this process is `python -m` one of globaltensor's launchers: its packages then load the runtime on first use.

`python -m globaltensor.paddle.distributed.launch train.py` imports globaltensor, globaltensor.paddle
and globaltensor.paddle.distributed before the launcher runs; the launcher needs none of the tensor
runtime (numpy, the native extension, the ops), only the standard library. Those packages' __init__
files ask is_launcher_process() and, in a launcher, defer their names to the first attribute use
(PEP 562 module __getattr__), which loads everything exactly as a plain import does. Every other
process (the ranks, the trainers and servers, a script, pytest) loads eagerly, as before. Nothing
is changed here: sys.orig_argv is read, the command line the interpreter was started with.
"""
import importlib.machinery
import os
import sys
import types

LAUNCHERS = frozenset({"globaltensor.distributed.launch", "globaltensor.paddle.distributed.launch"})
_VALUE_OPTIONS = "cmWX"  # the interpreter's one-letter options that take a value (-c cmd, -m mod, -W arg, -X opt)


def main_module(argv):
    """The module `python [options] -m MODULE ...` runs, from the interpreter's argv; None for a script,
    -c, or the REPL. Handles joined options (-um mod, -mmod, -Ximporttime)."""
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "--check-hash-based-pycs":
            i += 2
            continue
        if not arg.startswith("-") or arg in ("-", "--"):
            return None  # a script (or stdin): no -m came first
        if arg.startswith("--"):
            i += 1
            continue
        for j, letter in enumerate(arg[1:], start=2):
            if letter in _VALUE_OPTIONS:
                joined = arg[j:]
                value = joined or (argv[i + 1] if i + 1 < len(argv) else "")
                if letter == "m":
                    return value
                if letter == "c":
                    return None
                i += 0 if joined else 1
                break
        i += 1
    return None


def is_launcher_process():
    """True in the process `python -m globaltensor.distributed.launch` (or Paddle's launch) started."""
    return main_module(getattr(sys, "orig_argv", ())) in LAUNCHERS


def adopt(namespace, surface):
    """Give a package (its __init__'s globals()) the names its surface module defined, as if that code had
    run in the __init__: functions and classes defined there take the package's name as their module."""
    package = namespace["__name__"]
    for name, value in vars(surface).items():
        if name.startswith("__") and name not in ("__all__", "__version__"):
            continue
        if isinstance(value, (type, types.FunctionType)) and value.__module__ == surface.__name__:
            value.__module__ = package
        namespace[name] = value


_deferred = []  # in a launcher process: the packages' loaders not run yet, in import order (at most 4)
_loading = []  # non-empty while they run: a name missed meanwhile is a partial import's, as in a plain import


def load_or_defer(load):
    """Run a package __init__'s load() now, or in a launcher process keep it for the first name used."""
    if is_launcher_process():
        _deferred.append(load)
    else:
        load()


def _is_submodule(package_file, name):
    """Whether `name` is a module of the package (`from package import name` asks the package first)."""
    folder = os.path.dirname(package_file)
    return os.path.isfile(os.path.join(folder, name + ".py")) or \
        os.path.isfile(os.path.join(folder, name, "__init__.py")) or \
        any(os.path.isfile(os.path.join(folder, name + s)) for s in importlib.machinery.EXTENSION_SUFFIXES)


def load_deferred(package_file, name):
    """A deferred package's module __getattr__ calls this for `name`: loads every deferred package in the
    order a plain import loads them (distributed, globaltensor, paddle, paddle.distributed) and says
    True; False when nothing is deferred, they are loading now, or `name` is a dunder or a submodule."""
    if not _deferred or _loading or (name.startswith("__") and name not in ("__all__", "__version__")) or \
            _is_submodule(package_file, name):
        return False
    _loading.append(name)
    try:
        while _deferred:
            _deferred.pop(0)()
    finally:
        _loading.clear()
    return True


def surface_package(namespace, surface, after=None):
    """A package __init__'s whole body: its names come from its surface module (surface() imports and
    returns it), now or, in a launcher process, on the first name used; after(namespace) runs once they
    are in. Returns the package's module __getattr__ (assign it in the __init__)."""
    package = namespace["__name__"]

    def load():
        adopt(namespace, surface())
        if after is not None:
            after(namespace)

    def module_getattr(name):
        if load_deferred(namespace["__file__"], name) and name in namespace:
            return namespace[name]
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    load_or_defer(load)
    return module_getattr
