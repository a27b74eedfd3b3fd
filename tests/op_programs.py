"""Small programs over the op families, shared by the end-to-end and autograd tests.

Each entry: name -> (input arrays, function of the input tensors returning one tensor).
Float inputs are differentiable; the function's result is what gets compared.
"""
import numpy as np

import globaltensor as gt

_rng = np.random.default_rng(42)


def _f(*shape, lo=-1.0, hi=1.0):
    return _rng.uniform(lo, hi, shape).astype(np.float64)


def _i(*shape, hi=4):
    return _rng.integers(0, hi, shape).astype(np.int64)


PROGRAMS = {
    "unary_chain": ([_f(6, 5)], lambda x: gt.tanh(gt.sin(x) * 2 + gt.exp(x * 0.5)) + gt.sqrt(x * x + 1)),
    "binary_broadcast": ([_f(6, 5), _f(5)], lambda x, y: (x * y - x / (y + 3)) ** 2 + gt.maximum(x, y)),
    "where_clip": ([_f(6, 5), _f(6, 5)], lambda x, y: gt.where(x > y, x, y * 2).clip(-0.5, 0.8)),
    "reductions": ([_f(6, 5)], lambda x: gt.sum(x, 0) * 2 + gt.mean(x, 0) + gt.max(x, 0).values + gt.var(x, 0)),
    "full_reductions": ([_f(6, 5)], lambda x: gt.sum(x * x) + gt.norm(x) + gt.logsumexp(x, 1).sum()),
    "matmul_chain": ([_f(6, 4), _f(4, 5), _f(5)], lambda a, b, c: gt.relu(a @ b + c) @ gt.t(b)),
    "batched_matmul": ([_f(2, 6, 4), _f(2, 4, 3)], lambda a, b: gt.bmm(a, b)),
    "shape_ops": ([_f(6, 4)], lambda x: gt.concat([x.reshape(6, 2, 2).transpose(1, 2).flatten(1), x.flip(1)], 1)
                  .unsqueeze(0).squeeze(0)),
    "stack_split": ([_f(6, 4), _f(6, 4)], lambda x, y: gt.concat(gt.split(x, [1, 3], 1)[::-1], 1) + gt.stack([x, y], 1).sum(1)),
    "softmax_ce": ([_f(6, 5), _i(6, hi=5)], lambda x, t: gt.cross_entropy(x, t)),
    "layer_norm": ([_f(6, 5), _f(5), _f(5)], lambda x, w, b: gt.layer_norm(x, 5, w, b)),
    "linear_gelu_mse": ([_f(6, 4), _f(5, 4), _f(5), _f(6, 5)], lambda x, w, b, y: gt.mse_loss(gt.gelu(gt.linear(x, w, b)), y)),
    "embedding": ([_i(6, 2, hi=7), _f(7, 4)], lambda i, w: gt.embedding(i, w).sum(1)),
    "gather_sort": ([_f(6, 5), _i(6, 3, hi=5)], lambda x, i: gt.gather(x, 1, i) + gt.sort(x, 1)[0][:, :3]),
    "indexing": ([_f(6, 5)], lambda x: x[1:5, None, 2:] * 2 + x[2, 1]),
    "cumsum_tril": ([_f(5, 5)], lambda x: gt.tril(gt.cumsum(x, 1)) + gt.triu(x, 1).T),
}
