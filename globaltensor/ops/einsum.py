"""einsum as PyTorch's, a composite of permute, reshape, matmul, mul and sum: SBP and gradients for free."""
from __future__ import annotations

import math

import numpy as np

from ..tensor import Tensor
from ._front import constant
from .linalg import matmul
from .reduction import sum as _sum
from .shape import expand, permute, reshape

_ELLIPSIS_BASE = 0x100  # letters standing for the dims "..." covers: never in an equation of ASCII letters


def einsum(equation: str, *operands: Tensor) -> Tensor:
    """Sum of products of the operands' elements over the indices the equation names, as
    torch.einsum: `"ij,jk->ik"` is matmul, `"bij,bjk"` batched matmul (implicit output: the
    letters used once, in alphabetical order, after the dims of `...`), `"ii->i"` a diagonal,
    `"ii"` a trace, `"...ij->...ji"` a transpose of the last two dims. The operands may also be
    passed as one list. Written with registered ops (each pair contracted by one matmul), so
    split operands keep their SBP where the algebra allows and backward is every op's own.

    Examples:
        >>> gt.einsum("ij,jk->ik", a, b)          # a @ b
        >>> gt.einsum("bhqd,bhkd->bhqk", q, k)    # attention scores
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    terms, out = _parse(equation, operands)
    pieces = _broadcast([_diagonals(t, term) for t, term in zip(operands, terms)])  # each letter once a term
    cur_t, cur = pieces[0]
    for i in range(1, len(pieces) + 1):
        keep = set(out).union(*(term for _, term in pieces[i + 1:])) if i < len(pieces) else set(out)
        other = pieces[i][1] if i < len(pieces) else ""
        cur_t, cur = _sum_out(cur_t, cur, keep | set(other))
        if i == len(pieces):
            break
        b_t, b = _sum_out(pieces[i][0], pieces[i][1], keep | set(cur))
        cur_t, cur = _contract(cur_t, cur, b_t, b, keep)
    return _permute(cur_t, cur, out)


def _parse(equation, operands):
    """(one term per operand, the output term), '...' replaced by letters of their own."""
    if not isinstance(equation, str):
        raise TypeError(f"einsum(): the equation must be a str, got {type(equation).__name__}")
    lhs, arrow, rhs = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise RuntimeError(f"einsum(): more operands were provided than specified in the equation"
                           if len(operands) > len(terms) else
                           f"einsum(): fewer operands were provided than specified in the equation")
    for t in operands:
        if not isinstance(t, Tensor):
            raise TypeError(f"einsum(): operands must be tensors, got {type(t).__name__}")
    n_ell = 0
    for term, t in zip(terms, operands):
        named = len(term.replace("...", ""))
        if "..." in term:
            n_ell = max(n_ell, t.ndim - named)
        elif named != t.ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({named}) does not match the "
                               f"number of dimensions ({t.ndim}) for operand {terms.index(term)} and no ellipsis "
                               f"was given")
    ell = "".join(chr(_ELLIPSIS_BASE + i) for i in range(n_ell))
    for term in terms + [rhs]:
        bad = [c for c in term.replace("...", "") if not c.isalpha() or not c.isascii()]
        if bad or term.count("...") > 1 or term.replace("...", "").count(".") > 0:
            raise RuntimeError(f"einsum(): invalid subscript in equation {equation!r}: subscripts must be letters "
                               f"in [a-zA-Z], with at most one ellipsis ('...') per term")
    full = []
    for term, t in zip(terms, operands):
        if "..." in term:
            k = t.ndim - len(term.replace("...", ""))
            if k < 0:
                raise RuntimeError(f"einsum(): operand of {t.ndim} dims has more subscripts than dims in {term!r}")
            term = term.replace("...", ell[n_ell - k:])
        full.append(term)
    if arrow:
        out = rhs.replace("...", ell)
        for c in out:
            if out.count(c) > 1:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the output")
            if not any(c in term for term in full):
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any input "
                                   f"operand")
    else:
        counts = {}
        for term in terms:
            for c in term.replace("...", ""):
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted((c for c, n in counts.items() if n == 1)))  # ASCII order, as torch
    return full, out


def _diagonals(t, term):
    """(t, term) with each repeated letter taken once: the diagonal, as the eye mask times t summed
    over the second dim (a composite: mul and sum)."""
    while len(set(term)) < len(term):
        c = next(c for c in term if term.count(c) > 1)
        i = term.index(c)
        j = term.index(c, i + 1)
        n = t.shape[i]
        if t.shape[j] != n:
            raise RuntimeError(f"einsum(): subscript {c} is repeated for operand but the sizes don't match, "
                               f"{n} != {t.shape[j]}")
        shape = [1] * t.ndim
        shape[i] = shape[j] = n
        mask = constant(np.eye(n, dtype=t.dtype.np).reshape(shape), t)
        t = _sum(t * mask, dim=j)
        term = term[:j] + term[j + 1:]
    return t, term


def _broadcast(pieces):
    """Letters of size 1 in one operand and n in another expanded to n (PyTorch's broadcasting)."""
    sizes = {}
    for t, term in pieces:
        for c, n in zip(term, t.shape):
            if n != 1:
                if sizes.get(c, n) != n:
                    raise RuntimeError(f"einsum(): operands do not broadcast with remapped shapes: subscript {c} "
                                       f"has sizes {sizes[c]} and {n}")
                sizes[c] = n
    result = []
    for t, term in pieces:
        want = tuple(sizes.get(c, 1) for c in term)
        result.append((t if tuple(t.shape) == want else expand(t, want), term))
    return result


def _sum_out(t, term, keep):
    """t summed over the letters not in keep."""
    dims = [i for i, c in enumerate(term) if c not in keep]
    if not dims:
        return t, term
    return _sum(t, dim=tuple(dims)), "".join(c for c in term if c in keep)


def _permute(t, term, order):
    if term == order:
        return t
    return permute(t, tuple(term.index(c) for c in order))


def _contract(a, at, b, bt, keep):
    """The product of a and b over their shared letters: batch (kept), contracted (not kept) as one
    matmul of (B, L, C) by (B, C, R)."""
    batch = [c for c in at if c in bt and c in keep]
    contr = [c for c in at if c in bt and c not in keep]
    left = [c for c in at if c not in bt]
    right = [c for c in bt if c not in at]
    size = dict(zip(at, a.shape))
    size.update(zip(bt, b.shape))
    dims = lambda cs: math.prod(size[c] for c in cs)  # noqa: E731
    a = reshape(_permute(a, at, "".join(batch + left + contr)), (dims(batch), dims(left), dims(contr)))
    b = reshape(_permute(b, bt, "".join(batch + contr + right)), (dims(batch), dims(contr), dims(right)))
    out = reshape(matmul(a, b), tuple(size[c] for c in batch + left + right))
    return out, "".join(batch + left + right)
