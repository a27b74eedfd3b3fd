"""Updates from a row gradient (a sparse embedding's RowGrad): only the rows it touches change.

Each kernel first sums the values of repeated rows (ops.row_grad.coalesce: the same additions as
the dense gradient's index_add; unique=True: the caller did), so the touched rows come out bit for
bit as the dense update's and the other rows are not read. Inputs: the parameter, the gradient's
rows [n] and values [n, dim], the states, then the scalars (lr; step for Adam).

SBP rows (one mesh axis; rows and the scalars are B):
    B, B, B, ... -> B, ...            every rank updates the same rows of its whole copy
    S(1), B, S(1), ... -> S(1), ...   a table split by columns: each rank its columns of those rows
"""
import numpy as np

from ..registry import op
from ..sbp import broadcast as B
from ..sbp import split
from ..ops.row_grad import coalesce
from .updates import _adam


def row_rules(n_states, n_scalars):
    def rules(in_shapes, out_shapes, static):
        written = 1 + n_states
        return [((B,) * (3 + n_states + n_scalars), (B,) * written),
                ((split(1), B, split(1)) + (split(1),) * n_states + (B,) * n_scalars, (split(1),) * written)]

    def meta(in_shapes, in_dtypes, static):
        written = [0] + list(range(3, 3 + n_states))
        return [in_shapes[i] for i in written], [in_dtypes[i] for i in written]
    return rules, meta


def _merged(rows, values, unique):
    """rows unique (the optimizer passes RowGrad.coalesced()'s), or their repeats summed first."""
    if unique:
        return np.asarray(rows).reshape(-1), values
    return coalesce([(rows, values)], values.shape[1:], values.dtype)


def _check(w, rows):
    if len(rows) and (rows.min() < 0 or rows.max() >= w.shape[0]):
        raise IndexError(f"row update: rows outside the table of {w.shape[0]} rows "
                         f"(min {rows.min()}, max {rows.max()})")


_SGD_ROWS = row_rules(0, 1)


@op("sgd_rows_update", _SGD_ROWS[0], meta=_SGD_ROWS[1])
def sgd_rows_update(w, rows, values, lr, *, unique=False):
    """w[r] -= lr * (sum of the values at row r), for the rows r of the gradient only."""
    rows, summed = _merged(rows, values, unique)
    _check(w, rows)
    new = np.multiply(summed, -float(lr))  # w + (-lr) * g, the dense update's rounding
    new += np.take(w, rows, axis=0)
    w[rows] = new
    return w


_ADAM_ROWS = row_rules(2, 2)


@op("adam_rows_update", _ADAM_ROWS[0], meta=_ADAM_ROWS[1])
def adam_rows_update(w, rows, values, exp_avg, exp_avg_sq, lr, step, *, betas, eps, weight_decay=0.0, unique=False):
    """Paddle's lazy_mode Adam: the moments and the parameter of the gradient's rows take Adam's
    step (the bias corrections at the parameter's step count); the other rows keep theirs."""
    rows, summed = _merged(rows, values, unique)
    _check(w, rows)
    pw, pm, pv = (np.take(a, rows, axis=0) for a in (w, exp_avg, exp_avg_sq))
    _adam(pw, summed, pm, pv, (lr, step), betas, eps, weight_decay, False, decoupled=False)
    w[rows], exp_avg[rows], exp_avg_sq[rows] = pw, pm, pv
    return w, exp_avg, exp_avg_sq
