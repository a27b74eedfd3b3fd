"""Dynamic dims of static programs: sentinel sizes, traced arithmetic on them, and the run's substitution rules.

A dynamic dim (None / -1 in data's shape) is recorded at a sentinel size, one prime per dim
position. Executor.run substitutes the fed size into static attributes and constants of the forms
k*S, k*S±1 and a/(k*S±1) (`subst`). A dim read from a Variable's shape is a DynDim: its arithmetic
is traced (each result carries its formula in the sizes), and each result is checked at a second
and a third size assignment: where the rule would not give what the formula gives (N // 2 as an
int, 1 / N ** 0.5, float(N) into math.sqrt), the program is marked and Executor.run refuses to
feed another size than the recorded one, instead of computing with a stale constant. Untraced:
a float on the left (0.1 * n: float's own __mul__ takes the int), numpy on a dim, int(n) then math.
"""
import math
import os
import sys

import numpy as np

SENTINELS = (1019, 1021, 1031, 1033, 1039, 1049)
TRIALS = tuple({s: n for s, n in zip(SENTINELS, ns)} for ns in ((5, 7, 11, 13, 17, 19), (97, 89, 83, 79, 73, 71)))
SCALAR_SITE = os.path.join("ops", "_front.py")  # np.asarray(n, float) of an op's scalar operand
UNEXPLAINED_KEPT = 8  # expressions kept per program for the error


def sentinel_of(n):
    """The sentinels whose multiples n is (with multiplicity), or () for a fixed size."""
    found, n = [], int(n)
    for s in SENTINELS:
        while n and n % s == 0:
            found.append(s)
            n //= s
    return tuple(found)


# --- the run's rules ---------------------------------------------------------------------------
def subst_int(n, sizes):
    for s in sentinel_of(n):
        n = n // s * sizes.get(s, s)
    return n


def subst_float(v, sizes):
    """v = k * S + c or v = a / (k * S + c) for a sentinel product S, a small numerator a and c in
    {0, -1, 1} (a mean's count or 1/count, a squared error's 2/count, an unbiased variance's
    count - 1): S replaced by the fed sizes; any other float as it is."""
    if not np.isfinite(v) or v == 0:
        return v
    for a in (None, 1, 2, 3, 4, 6, 8):
        w = v if a is None else a / v
        n = round(w)
        if abs(w) < SENTINELS[0] - 1 or abs(w - n) > 1e-5 * abs(w):
            continue
        for c in (0, 1, -1):
            if sentinel_of(n + c):
                m = subst_int(n + c, sizes) - c
                return float(m) if a is None else a / m
    return v


def explained(value, formula, as_int):
    """Whether the run's rule (int or float) gives formula(sizes) at each trial size assignment."""
    for sizes in TRIALS:
        want = formula(sizes)
        got = subst_int(int(value), sizes) if as_int else subst_float(float(value), sizes)
        if not (got == want or (not as_int and math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12))):
            return False
    return True


def taint(program, text):
    found = getattr(program, "unexplained", None)
    if found is not None and len(found) < UNEXPLAINED_KEPT and text not in found:
        found.append(text)


# --- traced numbers -------------------------------------------------------------------------------
def _formula_of(x):
    return x.formula if isinstance(x, _Traced) else (lambda sizes, v=x: v)


def _text_of(x):
    return x.text if isinstance(x, _Traced) else repr(x)


def _binary(symbol, op, swap=False):
    def method(self, other):
        if isinstance(other, bool) or not isinstance(other, (int, float)):
            return NotImplemented
        a, b = (other, self) if swap else (self, other)
        value = op(_raw(a), _raw(b))
        fa, fb = _formula_of(a), _formula_of(b)
        return traced(value, lambda sizes: op(fa(sizes), fb(sizes)), f"({_text_of(a)} {symbol} {_text_of(b)})",
                      self.program)
    return method


def _raw(x):
    return int.__int__(x) if isinstance(x, int) else float.__float__(x) if isinstance(x, float) else x


class _Traced:
    """A number computed from dynamic dims: its value at the sentinel sizes and its formula."""

    __add__, __radd__ = _binary("+", lambda a, b: a + b), _binary("+", lambda a, b: a + b, True)
    __sub__, __rsub__ = _binary("-", lambda a, b: a - b), _binary("-", lambda a, b: a - b, True)
    __mul__, __rmul__ = _binary("*", lambda a, b: a * b), _binary("*", lambda a, b: a * b, True)
    __truediv__, __rtruediv__ = _binary("/", lambda a, b: a / b), _binary("/", lambda a, b: a / b, True)
    __floordiv__, __rfloordiv__ = _binary("//", lambda a, b: a // b), _binary("//", lambda a, b: a // b, True)
    __mod__, __rmod__ = _binary("%", lambda a, b: a % b), _binary("%", lambda a, b: a % b, True)
    __pow__, __rpow__ = _binary("**", lambda a, b: a ** b), _binary("**", lambda a, b: a ** b, True)

    def __neg__(self):
        f = self.formula
        return traced(-_raw(self), lambda sizes: -f(sizes), f"-{self.text}", self.program)

    def __pos__(self):
        return self

    def __abs__(self):
        f = self.formula
        return traced(abs(_raw(self)), lambda sizes: abs(f(sizes)), f"abs({self.text})", self.program)


class DynInt(_Traced, int):
    """An int computed from dynamic dims. float() of it (math.sqrt calls it) leaves the traced
    world: the program is marked (its float cannot be followed to the fed size), except where an
    op takes it as a scalar operand (ops/_front.py: a constant k*N, which the float rule carries)."""

    def __float__(self):
        caller = sys._getframe(1).f_code.co_filename
        if not caller.endswith(SCALAR_SITE):  # math.sqrt(n), float(n): the float leaves the traced world
            taint(self.program, f"float({self.text})")
        return float(int.__int__(self))

    __hash__ = int.__hash__


class DynFloat(_Traced, float):
    __hash__ = float.__hash__


def traced(value, formula, text, program):
    """value as a traced number; the program is marked where no run rule explains it (an int
    is checked when it lands as an attribute, see check_attr; a float at once)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        taint(program, text)
        return value
    out = (DynInt if isinstance(value, int) else DynFloat)(value)
    out.formula, out.text, out.program = formula, text, program
    if isinstance(value, float) and not explained(value, formula, False):
        taint(program, text)
    elif isinstance(value, int) and not (explained(value, formula, True) or explained(value, formula, False)):
        taint(program, text)
    return out


class DynDim(DynInt):
    """A dim the feed decides: it computes as its sentinel size (which Executor.run replaces by the
    fed size wherever it went), traced, and prints and compares as Paddle's -1."""

    def __new__(cls, n, program=None):
        out = int.__new__(cls, n)
        out.formula, out.text, out.program = (lambda sizes, n=int(n): subst_int(n, sizes)), "N", program
        if len(sentinel_of(n)) == 1 and n // sentinel_of(n)[0] == 1:
            out.text = f"N{SENTINELS.index(int(n))}"
        return out

    def __repr__(self):
        return "-1"

    __str__ = __repr__

    def __eq__(self, other):
        return other == -1 or int.__eq__(self, other) is True

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = int.__hash__


def check_attr(value, program):
    """An op's static attribute holding traced ints: each must be one the int rule substitutes."""
    if isinstance(value, DynInt) and not explained(value, value.formula, True):
        taint(program, value.text)
    elif isinstance(value, dict):
        for v in value.values():
            check_attr(v, program)
    elif isinstance(value, (tuple, list)):
        for v in value:
            check_attr(v, program)
    elif isinstance(value, slice):
        for v in (value.start, value.stop, value.step):
            check_attr(v, program)
