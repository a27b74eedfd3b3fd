"""OneFlow's flow.utils.global_view: to_global/to_local over nested containers, and global_mode (a contextvar)."""
import collections
import functools
import pickle
import types
import warnings

import numpy as np

from ..env import get_rank, get_world_size
from ..scope import global_mode as _mode
from ..tensor import Tensor

__all__ = ["to_global", "to_local", "global_mode", "current_global_mode"]

SOURCES = ("arange", "empty", "eye", "full", "linspace", "normal", "ones", "rand", "randint", "randn", "randperm",
           "uniform", "zeros")  # the source ops: under global_mode they make global tensors directly


def _map(obj, leaf):
    """obj with leaf(x) for every leaf x, dicts (OrderedDict too), lists and tuples (named ones too) rebuilt."""
    if isinstance(obj, dict):
        items = [(k, _map(v, leaf)) for k, v in obj.items()]
        return dict(items) if isinstance(obj, collections.defaultdict) else type(obj)(items)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_map(v, leaf) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map(v, leaf) for v in obj)
    return leaf(obj)


def _non_tensor(node, warn):
    if warn:
        warnings.warn(f"Non-Tensor type: {type(node)} encountered, it will remain the same.", stacklevel=3)
    return node


def _all_local(obj):
    """Whether obj's tensors are local (False when none); mixing local and global raises, as OneFlow."""
    kinds = set()
    _map(obj, lambda x: kinds.add(x.is_global) if isinstance(x, Tensor) else None)
    if len(kinds) > 1:
        raise ValueError("to_global: the tensors in the input must be all local or all global")
    return kinds == {False}


def _structure_from_first_rank(obj, placement, warn):
    """A placement that leaves ranks out, local input: the ranks outside take the tree of the placement's
    first rank (its tensors as empty placeholders), so every rank converts the same structure."""
    from ..creation import empty
    from ..serialization.directory import broadcast_bytes
    src = int(np.asarray(placement.ranks).flat[0])
    blob = None
    if get_rank() == src:
        blob = pickle.dumps(_map(obj, lambda x: None if isinstance(x, Tensor) else _non_tensor(x, warn)))
    tree = pickle.loads(broadcast_bytes(blob, src))
    if get_rank() in np.asarray(placement.ranks):
        return obj
    return _map(tree, lambda x: empty(0, 1) if x is None else x)


def to_global(input, placement=None, sbp=None, warn_on_non_tensor_leaf=True, **kwargs):  # noqa: A002
    """flow.utils.global_view.to_global: every tensor in input (a tensor, or dicts/lists/tuples of them:
    a state dict) to_global(placement, sbp), by Tensor.to_global's rule; sbp may be a function
    sbp(input, tensor) choosing per tensor; a Module converts its parameters and buffers; other leaves stay
    (with a warning unless warn_on_non_tensor_leaf=False). grad_sbp= goes to global tensors only."""
    if hasattr(input, "to_global") and not isinstance(input, Tensor):  # a Module
        return input.to_global(placement, sbp)
    if not isinstance(input, (Tensor, dict, list, tuple)):
        return _non_tensor(input, warn_on_non_tensor_leaf)
    if placement is not None and _all_local(input) and np.asarray(placement.ranks).size < get_world_size():
        input = _structure_from_first_rank(input, placement, warn_on_non_tensor_leaf)
    root = input

    def leaf(node):
        if not isinstance(node, Tensor):
            return _non_tensor(node, warn_on_non_tensor_leaf)
        chosen = sbp(root, node) if isinstance(sbp, types.FunctionType) else sbp
        extra = kwargs if node.is_global else {k: v for k, v in kwargs.items() if k != "grad_sbp"}
        return node.to_global(placement, chosen, **extra)
    return _map(input, leaf)


def to_local(input, *, copy=False):  # noqa: A002 - OneFlow's name
    """flow.utils.global_view.to_local: every global tensor in input to this rank's piece (copied when
    copy=True); a local tensor stays, with OneFlow's warning; other leaves stay, with a warning."""
    def leaf(node):
        if not isinstance(node, Tensor):
            return _non_tensor(node, True)
        if not node.is_global:
            warnings.warn("The tensor should be global, local tensor will remain the same.", stacklevel=3)
            return node
        out = node.to_local()
        return out.clone() if copy else out
    return _map(input, leaf)


class global_mode:  # noqa: N801 - OneFlow's name
    """`with global_mode(True, placement=P, sbp=B):` the source ops (gt.randn, zeros, ones, arange, ...)
    called without placement= make global tensors on P with B, and a global tensor's `.device` is its
    placement's type; global_mode(False) turns it off inside. Scoped to this context (a contextvar): other
    threads and tasks keep theirs."""

    def __init__(self, enabled, placement=None, sbp=None):
        if enabled and (placement is None or sbp is None):
            raise ValueError("global_mode(True, placement, sbp): both placement and sbp are required")
        from ..sbp import normalize
        self._value = (placement, normalize(sbp, placement.ndim)) if enabled else None
        self._token = None

    def __enter__(self):
        self._token = _mode.set(self._value)
        return self

    def __exit__(self, *exc):
        _mode.reset(self._token)


class current_global_mode:  # noqa: N801 - OneFlow's name
    """The global mode in force here: .is_enabled, .placement, .sbp (a tuple; None when disabled)."""

    def __init__(self):
        value = _mode.get()
        self.is_enabled = value is not None
        self.placement, self.sbp = value if value is not None else (None, None)


def sourced(factory):
    """factory, making a global tensor under global_mode when called without placement=."""
    @functools.wraps(factory)
    def call(*args, **kwargs):
        mode = _mode.get()
        if mode is not None and kwargs.get("placement") is None:
            kwargs.pop("device", None)
            kwargs["placement"], kwargs["sbp"] = mode
        return factory(*args, **kwargs)
    return call
