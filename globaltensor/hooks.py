"""Where lower layers report to a graph capture (graph/) recording this context's step."""
from .scope import recorder


def readback(what, tensor):
    """Called where a tensor's value is read into Python (item(), numpy(), bool(x), ...): inside a
    capture this raises, naming the read and the op that made the tensor."""
    rec = recorder()
    if rec is not None:
        rec.refuse_readback(what, tensor)


def host_step(name, fn, *tensors):
    """fn(*their pieces): a computation on local pieces made outside the dispatcher (a copy, a
    move); inside a capture it is recorded as a step of the program."""
    rec = recorder()
    return fn(*[t._local for t in tensors]) if rec is None else rec.host_step(name, fn, tensors)


def effect(name, fn, data=None):
    """fn(): a step that changes state outside the dispatcher (an optimizer's update, zero_grad, a
    scheduler's step); inside a capture it runs once and is recorded whole, to run at each replay
    (`data`: what it does as data, so a saved program can rebuild it; see graph/rebuild.py)."""
    rec = recorder()
    return fn() if rec is None else rec.step(name, fn, data)
