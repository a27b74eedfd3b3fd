"""Dynamic dims of static programs: sentinel sizes, traced arithmetic on them, and the run's substitution rules.

A dynamic dim (None / -1 in data's shape) is recorded at a sentinel size, one prime per dim
position. Executor.run substitutes the fed size into static attributes and constants of the forms
k*S, k*S±1 and a/(k*S±1) (`subst`). A dim read from a Variable's shape is a DynDim: its arithmetic
is traced (each result carries its formula in the sizes), and each result is checked at a second
and a third size assignment: where the rule would not give what the formula gives (N // 2 as an
int, 1 / N ** 0.5, float(N) into math.sqrt), the program is marked and Executor.run refuses to
feed another size than the recorded one, instead of computing with a stale constant. numpy's
ufuncs on a dim (np.sqrt(n)) are traced too (__array_ufunc__). What no hook sees (a float on the
left, 0.1 * n: float's own __mul__ reads the int; int(n) or np.asarray(n), then math) is caught
where the value lands (`check_folded`): a float constant or attribute that is a short decimal
times N, sqrt(N), N**2 or log(N) (or over it) marks the program, and after user code took a dim
out of the traced world by int()/np.asarray, so does an int near N // k or N ± c.
"""
import functools
import math
import os
import sys

import numpy as np

SENTINELS = (1019, 1021, 1031, 1033, 1039, 1049)
TRIALS = tuple({s: n for s, n in zip(SENTINELS, ns)} for ns in ((5, 7, 11, 13, 17, 19), (97, 89, 83, 79, 73, 71)))
PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # globaltensor/
NUMPY_DIR = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))
SCALAR_SITE = os.path.join("ops", "_front.py")  # np.asarray(n, float) of an op's scalar operand
UNEXPLAINED_KEPT = 8  # expressions kept per program for the error


def sentinel_of(n):
    """The sentinels whose multiples n is (with multiplicity), or () for a fixed size."""
    return _sentinel_of(int(n))


@functools.lru_cache(maxsize=4096)  # bounded; each run asks it for every dim of every feed
def _sentinel_of(n):
    found = []
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

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """np.sqrt(n), np.float32(0.5) * n: traced like the operators (a ufunc over arrays computes
        plainly, and the dim has left the traced world: `escaped`)."""
        raw = [_raw(x) if isinstance(x, _Traced) else x for x in inputs]
        scalar = all(isinstance(x, (int, float, np.number)) and not isinstance(x, (bool, np.bool_)) for x in raw)
        if method != "__call__" or kwargs or ufunc.nout != 1 or not scalar:
            escaped(self.program, f"np.{ufunc.__name__}({self.text})")
            return getattr(ufunc, method)(*raw, **kwargs)
        fs = [_formula_of(x) for x in inputs]
        value = ufunc(*raw).item()
        return traced(value, lambda sizes: ufunc(*[f(sizes) for f in fs]).item(),
                      f"np.{ufunc.__name__}({', '.join(_text_of(x) for x in inputs)})", self.program)


def _from_user_code():
    """Whether the caller of the caller (numpy's own frames passed over) is outside globaltensor."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(NUMPY_DIR + os.sep + "numpy"):
        frame = frame.f_back
    return frame is not None and not frame.f_code.co_filename.startswith(PACKAGE)


class DynInt(_Traced, int):
    """An int computed from dynamic dims. float() of it (math.sqrt calls it) leaves the traced
    world: the program is marked (its float cannot be followed to the fed size), except where an
    op takes it as a scalar operand (ops/_front.py: a constant k*N, which the float rule carries)."""

    def __float__(self):
        caller = sys._getframe(1).f_code.co_filename
        if not caller.endswith(SCALAR_SITE):  # math.sqrt(n), float(n): the float leaves the traced world
            taint(self.program, f"float({self.text})")
        return float(int.__int__(self))

    def __int__(self):
        if _from_user_code():  # int(n), np.asarray(n) in user code
            escaped(self.program, f"int({self.text})")
        return int.__int__(self)

    def __floor__(self):  # math.floor(n), round(n) of an int: the same traced int
        return self

    __ceil__ = __trunc__ = __floor__

    def __round__(self, ndigits=None):
        return self if ndigits is None or ndigits >= 0 else traced(
            round(int.__int__(self), ndigits), lambda sizes, f=self.formula: round(f(sizes), ndigits),
            f"round({self.text}, {ndigits})", self.program)

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
    """An op's static attribute holding traced ints: each must be one the int rule substitutes;
    a plain number in it must not be an untraced fold of a dynamic dim (check_folded)."""
    if isinstance(value, DynInt) and not explained(value, value.formula, True):
        taint(program, value.text)
    elif isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, _Traced)):
        check_folded(value, program)
    elif isinstance(value, dict):
        for v in value.values():
            check_attr(v, program)
    elif isinstance(value, (tuple, list)):
        for v in value:
            check_attr(v, program)
    elif isinstance(value, slice):
        for v in (value.start, value.stop, value.step):
            check_attr(v, program)


# --- folds no hook sees ---------------------------------------------------------------------------
FOLD_FORMS = (("N", lambda s: s), ("sqrt(N)", math.sqrt), ("N**2", lambda s: s * s), ("log(N)", math.log),
              ("log2(N)", math.log2), ("log10(N)", math.log10))
INT_DIVISORS = range(2, 9)  # int(n) // k (and (int(n) + 1) // 2): few, so a user's 255 or 64 stays free
INT_OFFSETS = (-2, -1, 1, 2)  # int(n) - 1 in an int attribute (the int rule carries only k*N)


def escaped(program, text):
    """A dynamic dim left the traced world in user code (int(n), np.asarray(n)): from here on an int
    that lands in the program near N // k or N ± c is taken for a fold of it (check_folded)."""
    found = getattr(program, "dims_escaped", None)
    if found is not None and len(found) < UNEXPLAINED_KEPT and text not in found:
        found.append(text)


def _digits(x, rel):
    """Significant decimal digits of x to relative precision rel (13 where none up to 12 gives it)."""
    for d in range(1, 13):
        if math.isclose(float(f"{x:.{d}g}"), x, rel_tol=rel):
            return d
    return 13


def _written(x, rel=1e-9):
    """Whether x is a number people write: a short decimal or a small fraction (0.1, 0.25, 1/3)."""
    return x != 0 and any(_digits(x * q, rel) <= 3 for q in (1, 3, 6, 7, 9, 12))


def _sentinels(program):
    found = set()
    for r in getattr(program, "feeds", {}).values():
        for n in program.regs[r].local_shape:
            found.update(sentinel_of(n))
    return sorted(found)


def fold_of(value, sentinels, ints):
    """The untraced fold of a sentinel that value looks like ('0.1 * N'), or None."""
    if isinstance(value, (int, np.integer)):
        v = int(value)
        if not ints or sentinel_of(v) or v == 0:
            return None
        for s in sentinels:
            for k in INT_DIVISORS:
                if v == s // k or (k == 2 and v == (s + 1) // 2):
                    return f"N // {k}"
            for c in INT_OFFSETS:
                if v == s + c:
                    return f"N {'+-'[c < 0]} {abs(c)}"
        return None
    v, rel = float(value), 2e-7 if isinstance(value, (np.float32, np.float16)) else 1e-9
    if not np.isfinite(v) or (sentinels and subst_float(v, TRIALS[0]) != v):
        return None  # one the float rule carries (k*N, N - 1, 1/N)
    if v.is_integer() and abs(v) < 2 ** 53 and fold_of(int(v), sentinels, ints):  # int(n) // 2 as a scalar
        return fold_of(int(v), sentinels, ints)
    if _written(v, rel) or not sentinels:
        return None  # a constant of the user's
    for s in sentinels:
        for label, g in FOLD_FORMS:
            for r, form in ((v / g(s), "{r:.6g} * {n}"), (v * g(s), "{r:.6g} / {n}")):
                if _written(r, rel):
                    return form.format(r=r, n=label)
    return None


def check_folded(value, program):
    """Mark the program where a plain number landing in it (an attribute, a constant's value or
    shape) looks like a dynamic dim folded outside the traced arithmetic."""
    if program is None or not getattr(program, "feeds", None):
        return
    sentinels = _sentinels(program)
    if not sentinels:
        return
    if isinstance(value, np.ndarray):
        for n in value.shape:
            check_folded(int(n), program)
        if value.size and value.dtype.kind in "iuf" and (value == value.reshape(-1)[0]).all():
            check_folded(value.reshape(-1)[0], program)  # a numpy scalar: its precision decides
        return
    fold = fold_of(value, sentinels, bool(getattr(program, "dims_escaped", None)))
    if fold is not None:
        how = f" after {', '.join(program.dims_escaped)}" if fold.startswith(("N //", "N +", "N -")) else ""
        shown = value.item() if isinstance(value, np.generic) else value
        taint(program, f"{shown!r} (= {fold}, folded outside the traced arithmetic{how})")
