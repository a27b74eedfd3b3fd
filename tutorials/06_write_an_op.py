# %% [markdown]
# # 06 · Write an op
#
# An op is three things on one screen: a **kernel** (numpy, on each rank's local piece), its
# **SBP rows** (for one mesh axis: which input layouts give which output layout, each with its
# algebra), and its **backward** (written with gt ops, so its collectives come for free). The
# dispatcher expands rows to N-D meshes, prices each by the bytes boxing would move, picks the
# cheapest and caches the decision.
#
# Example: `softplus(x) = log(1 + exp(x))`, element-wise.

# %%
import numpy as np

import globaltensor as gt
from globaltensor import distributed as dist
from globaltensor.dispatch import apply
from globaltensor.ops import rules
from globaltensor import registry  # used as registry.REGISTRY: spawned ranks then see the real one
from globaltensor.registry import op

S0, S1, B, P = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast, gt.sbp.partial_sum


def register():
    """Register softplus once per process (each rank registers it too)."""
    if "softplus" in registry.REGISTRY:
        return

    # Rows for one mesh axis. Element-wise: a split input gives a split output,
    #   softplus(x)[i] = softplus(x[i]);  broadcast gives broadcast.
    # No P -> P row: softplus(a1 + a2) != softplus(a1) + softplus(a2).
    def softplus_rows(in_shapes, out_shapes, static):
        rows = [((gt.sbp.split(d),), (gt.sbp.split(d),)) for d in range(len(in_shapes[0]))]
        return rows + [((B,), (B,))]

    def softplus_backward(ctx, grad):
        (x,) = ctx.inputs
        return grad * gt.sigmoid(x)  # d/dx log(1 + e^x) = sigmoid(x)

    @op("softplus", softplus_rows, softplus_backward)
    def softplus_kernel(x):
        return np.logaddexp(0, x)


def softplus(x):
    register()
    return apply("softplus", [x])


# %% [markdown]
# The same rows come from a generator: `rules.elementwise()` writes them for any number of
# inputs with numpy broadcasting (and the P rows for linear ops: `linear="sum"` for add,
# `"each"` for multiply). Contractions use `rules.einsum("mk,kn->mn")`, reductions
# `rules.reduction(linear=...)`. Checked: for a 2-D input both give the rows written out by
# hand, S(0) -> S(0), S(1) -> S(1) and B -> B.

# %%
register()
print(rules.elementwise()([(4, 3)], [(4, 3)], {}))
print(registry.REGISTRY["softplus"].rules([(4, 3)], [(4, 3)], {}))
by_hand = [((S0,), (S0,)), ((S1,), (S1,)), ((B,), (B,))]
assert rules.elementwise()([(4, 3)], [(4, 3)], {}) == by_hand
assert registry.REGISTRY["softplus"].rules([(4, 3)], [(4, 3)], {}) == by_hand


# %% [markdown]
# ## Using it on global tensors
#
# A split input stays split (no communication); a partial input must be reduced first, and
# the dispatcher inserts that collective by itself. Backward works through `sigmoid` and `*`.
# Checked: the split input runs no collective and stays S(0); the partial input (its value is
# all ones) is reduced by one collective before the kernel, so the result is softplus(1), not
# the sum of softplus of the pieces; value and gradient equal numpy's log(1 + e^x) and
# 1 / (1 + e^-x) to the 4 printed decimals.

# %%
def use():
    register()
    placement = gt.placement("cpu", [0, 1])
    x = gt.tensor(np.linspace(-2, 2, 8).reshape(4, 2), placement=placement, sbp=S0, requires_grad=True)
    with gt.debug.count_collectives() as split_input:
        y = softplus(x)
    partial = gt.tensor(np.ones((4, 2)), placement=placement, sbp=P)
    with gt.debug.count_collectives() as partial_input:
        z = softplus(partial)
    assert np.allclose(z.numpy(), np.log1p(np.exp(np.ones((4, 2)))))  # softplus of the reduced value
    y.sum().backward()
    return (y.sbp, dict(split_input), z.sbp, dict(partial_input), y.numpy().round(4).tolist(),
            x.grad.numpy().round(4).tolist())


y_sbp, split_counts, z_sbp, partial_counts, value, grad = dist.spawn(use, nprocs=2)[0]
print("split input   ->", y_sbp, split_counts)
print("partial input ->", z_sbp, partial_counts)
print("value:", value)
print("grad: ", grad)

x_values = np.linspace(-2, 2, 8).reshape(4, 2)  # use()'s input
assert y_sbp == (S0,) and split_counts == {}
assert z_sbp != (P,) and sum(partial_counts.values()) == 1
assert np.allclose(value, np.log1p(np.exp(x_values)), atol=1e-4)   # rounded to 4 decimals above
assert np.allclose(grad, 1 / (1 + np.exp(-x_values)), atol=1e-4)


# %% [markdown]
# ## Checking the rows
#
# A wrong row gives wrong numbers silently, so the test suite checks every row of every
# registered op on simulated ranks (`tests/ops/test_soundness.py`): it cuts numpy inputs into the
# pieces a row's input SBPs give, runs the kernel per piece, reassembles by the output SBP
# and compares with the kernel on the full values. Here is that check by hand for a wrong
# row, `P -> P` (checked: the pieces add up to x, yet their softplus values do not add up to
# softplus(x)):

# %%
x = np.array([0.5, -1.0, 2.0])
pieces = [x - 1.0, np.full(3, 1.0)]  # two summands of x
kernel = registry.REGISTRY["softplus"].kernel
print("softplus(x):           ", kernel(x).round(4))
print("sum of softplus(piece):", sum(kernel(p) for p in pieces).round(4), "<- so P -> P would be wrong")
assert np.array_equal(sum(pieces), x) and np.allclose(kernel(x), np.log1p(np.exp(x)))
assert not np.allclose(sum(kernel(p) for p in pieces), kernel(x))
