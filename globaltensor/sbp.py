"""SBP: how a tensor lies along one mesh axis: split(dim), broadcast or partial_sum.

`repr` pastes back (gt.sbp.split(dim=0)); `str` is short (S(0), B, P).
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

from .errors import PlacementError


class _SBP:
    __slots__ = ()

    def __setattr__(self, name, value):
        raise AttributeError("sbp values are immutable")

    def __reduce__(self):
        return (_restore, (str(self),))

    def __call__(self) -> _SBP:
        """The value itself: OneFlow code writes both flow.sbp.broadcast and flow.sbp.broadcast()."""
        return self


class split(_SBP):  # noqa: N801 - OneFlow's name
    """Each rank along the mesh axis holds one slice of tensor dimension `dim` (uneven allowed)."""

    __slots__ = ("dim",)

    def __init__(self, dim: int) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"split(dim) needs an int dim, got {dim!r}")
        if dim < 0:
            raise PlacementError(f"Split axis must not be negative, but got {dim}! (split(dim) needs dim >= 0)")
        object.__setattr__(self, "dim", dim)

    def __eq__(self, other):
        return isinstance(other, split) and other.dim == self.dim

    def __hash__(self):
        return hash(("S", self.dim))

    def __repr__(self):
        return f"gt.sbp.split(dim={self.dim})"

    def __str__(self):
        return f"S({self.dim})"


class _Broadcast(_SBP):
    """Every rank along the mesh axis holds the whole value."""

    __slots__ = ()

    def __repr__(self):
        return "gt.sbp.broadcast"

    def __str__(self):
        return "B"


class _PartialSum(_SBP):
    """The value is the sum of the pieces of the ranks along the mesh axis."""

    __slots__ = ()

    def __repr__(self):
        return "gt.sbp.partial_sum"

    def __str__(self):
        return "P"


broadcast = _Broadcast()
partial_sum = _PartialSum()
sbp = _SBP  # the type, for isinstance checks: isinstance(x, gt.sbp.sbp)


def _restore(text):
    if text == "B":
        return broadcast
    if text == "P":
        return partial_sum
    return split(int(text[2:-1]))


def is_split(s: _SBP) -> bool:
    return isinstance(s, split)


def without_partial(sbp: tuple[_SBP, ...]) -> tuple[_SBP, ...]:
    """The SBP with each partial_sum axis made broadcast (what reducing the partial sums gives)."""
    return tuple(broadcast if s is partial_sum else s for s in sbp)


def reducible_axes(value_sbp: tuple[_SBP, ...], partial_sbp: tuple[_SBP, ...]) -> Optional[tuple[int, ...]]:
    """The mesh axes where `partial_sbp` is partial_sum and `value_sbp` broadcast (summing over
    them turns the one into the other), or None when they differ otherwise or not at all."""
    if partial_sbp == value_sbp:
        return None
    axes = []
    for a, (p, v) in enumerate(zip(partial_sbp, value_sbp)):
        if p is partial_sum and v is broadcast:
            axes.append(a)
        elif p != v:
            return None
    return tuple(axes)


def normalize(value: Union[_SBP, Sequence[_SBP]], ndim_mesh: int, tensor_ndim: Optional[int] = None) -> tuple[_SBP, ...]:
    """A tuple with one SBP per mesh axis; ValueError/TypeError saying what is wrong."""
    items = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    for s in items:
        if not isinstance(s, _SBP):
            raise TypeError(f"sbp must be gt.sbp.split(dim), gt.sbp.broadcast or gt.sbp.partial_sum (or a tuple of "
                            f"them, one per mesh axis), got {s!r}")
    if len(items) != ndim_mesh:
        raise ValueError(f"sbp {_text(items)} has {len(items)} entries but the placement's mesh has {ndim_mesh} "
                         f"axes: give one SBP per mesh axis")
    if tensor_ndim is not None:
        for s in items:
            if isinstance(s, split) and s.dim >= tensor_ndim:
                raise PlacementError(f"Split axis out of range (expected to be in range of [0, {tensor_ndim}), but got "
                                     f"{s.dim}! {s} on a {tensor_ndim}-D tensor: dim must be in [0, {tensor_ndim})")
    return items


class Signature(tuple):
    """An op's SBP signature: the inputs' SBPs and the outputs', each one SBP (a row of one mesh
    axis) or a tuple of one per mesh axis. A pair (inputs, outputs), as the rules write rows.

    Examples:
        >>> str(Signature((split(1), split(0)), (partial_sum,)))
        'S(1), S(0) -> P'
        >>> str(Signature(((split(0), broadcast),), ((split(0), partial_sum),)))
        '(S(0), B) -> (S(0), P)'
    """

    __slots__ = ()

    def __new__(cls, inputs: Sequence, outputs: Sequence) -> Signature:
        return super().__new__(cls, (tuple(inputs), tuple(outputs)))

    @property
    def inputs(self):
        return self[0]

    @property
    def outputs(self):
        return self[1]

    def __str__(self):
        def one(s):
            if not isinstance(s, tuple):
                return str(s)
            return str(s[0]) if len(s) == 1 else _text(s)
        return f"{', '.join(map(one, self.inputs))} -> {', '.join(map(one, self.outputs))}"

    def __repr__(self):
        return f"Signature({self})"


def _text(items):
    return "(" + ", ".join(str(s) for s in items) + ")"
