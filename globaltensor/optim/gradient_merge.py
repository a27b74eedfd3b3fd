"""GradientMerge: an optimizer that updates once per k micro-batches, reducing the gradients once."""
from .. import autograd
from ..scope import scoped


class GradientMerge:
    """Wraps an optimizer (Paddle's gradient_merge, OneFlow's gradient accumulation, eager):

        opt = gt.optim.GradientMerge(gt.optim.Adam(model.parameters()), k_steps=4, avg=True)
        for x, y in loader:                  # micro-batches
            loss_fn(model(x), y).backward()
            opt.step(); opt.zero_grad()      # the update and the clearing happen every 4th call

    Backward of the first k-1 micro-batches of each group keeps the gradients of the wrapped
    optimizer's parameters partial (as inside no_sync(): no collective); the k-th reduces the
    accumulated sum once. step() on the k-th call divides the gradients by k (avg) and runs the
    optimizer; zero_grad()/clear_grad() clear only after such an update. Other attributes are
    the wrapped optimizer's."""

    def __init__(self, optimizer, k_steps=1, avg=True):
        if isinstance(k_steps, bool) or not isinstance(k_steps, int) or k_steps < 1:
            raise ValueError(f"GradientMerge: k_steps must be an int >= 1, got {k_steps!r}")
        if not isinstance(avg, bool):
            raise TypeError(f"GradientMerge: avg must be a bool, got {avg!r}")
        self.optimizer, self.k_steps, self.avg = optimizer, k_steps, avg
        self.micro_step = 0  # micro-batches since the last update
        self._updated = False
        self._ids = {id(p) for group in optimizer.param_groups for p in group["params"]}
        autograd.sinks.add(self, first=True)  # before the gradient buckets read the sync flag

    @property
    def boundary(self):
        """True when the next step() updates (this micro-batch's backward reduces)."""
        return self.micro_step == self.k_steps - 1

    def begin(self, run):
        """autograd's sink protocol: inside the group (not its last micro-batch), backward
        over our parameters runs as under no_sync()."""
        if self.boundary or not any(id(leaf) in self._ids for leaf in run.leaves):
            return None
        return _NoSyncTaker()

    def step(self):
        self.micro_step += 1
        if self.micro_step < self.k_steps:
            return
        self.micro_step = 0
        if self.avg and self.k_steps > 1:
            for group in self.optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.grad = p.grad * (1.0 / self.k_steps)
        self.optimizer.step()
        self._updated = True

    def zero_grad(self, *args, **kwargs):
        if self._updated:
            self._updated = False
            return self.optimizer.zero_grad(*args, **kwargs)

    def clear_grad(self, *args, **kwargs):
        if self._updated:
            self._updated = False
            clear = getattr(self.optimizer, "clear_grad", None) or self.optimizer.zero_grad
            return clear(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.__dict__["optimizer"], name)


class _NoSyncTaker:
    """Holds no_sync() for one backward: entered at begin, left at finish (or abandon)."""

    def __init__(self):
        self._scope = scoped(sync=False)
        self._scope.__enter__()

    def take(self, leaf, g):
        return g

    def finish(self):
        self._scope.__exit__(None, None, None)

    abandon = finish
