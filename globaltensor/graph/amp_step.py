"""A graph's mixed precision: its step under autocast (GraphConfig.enable_amp) and loss scaling by its grad scaler."""
from ..amp import lists
from ..amp.autocast_mode import Policy, using


def policy_of(config, scaler):
    """The autocast policy of a graph's build: gt's lists (matmul/linear/conv in config.amp_dtype,
    losses in float32) when enable_amp; loss_scale the scaler's current scale (backward() seeds it).
    None when neither is set."""
    if not config.amp_enabled and scaler is None:
        return None
    lower, float32 = (lists.CPU_LOWER, lists.CPU_FLOAT32) if config.amp_enabled else ((), ())
    return Policy(None, config.amp_dtype, lower, float32, loss_scale=scaler.get_scale() if scaler else None)


def amp_scope(graph):
    """The with block a graph's build runs in (its own _amp_policy() when it defines one: Paddle's lists)."""
    custom = getattr(graph, "_amp_policy", None)
    return using(custom() if custom is not None else policy_of(graph.config, graph.__dict__.get("_grad_scaler")))


def optimizer_step(graph, optimizer):
    """optimizer.step(), through the graph's grad scaler when it has one (unscale, inf/nan agreed
    across ranks, skip)."""
    scaler = graph.__dict__.get("_grad_scaler")
    if scaler is None:
        optimizer.step()
    else:
        scaler.step(optimizer)


def finish_step(graph):
    scaler = graph.__dict__.get("_grad_scaler")
    if scaler is not None:
        scaler.update()


__all__ = ["policy_of", "amp_scope", "optimizer_step", "finish_step"]
