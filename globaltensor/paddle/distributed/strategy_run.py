"""What dist.Strategy's recompute, gradient_merge and pipeline do to a DistModel's train step."""
import collections

from ...nn import Sequential
from ...nn.graph import set_recompute
from ...pipeline import Pipeline
from .strategy import Strategy

# Paddle's schedule_mode -> the pipeline engine's schedule
_SCHEDULES = {"1F1B": "1f1b", "FThenB": "gpipe"}


def checked(strategy):
    """The strategy (a default one for None); bad fields raise before anything runs."""
    if strategy is None:
        return Strategy()
    if not isinstance(strategy, Strategy):
        raise TypeError(f"to_static: strategy must be a dist.Strategy, got {type(strategy).__name__}")
    gm, pp = strategy.gradient_merge, strategy.pipeline
    if gm.enable and gm.k_steps < 1:
        raise ValueError(f"Strategy.gradient_merge.k_steps must be >= 1, got {gm.k_steps}")
    if pp.enable:
        if pp.schedule_mode not in _SCHEDULES:
            raise ValueError(f"Strategy.pipeline.schedule_mode {pp.schedule_mode!r} is not supported here; "
                             f"supported: {sorted(_SCHEDULES)}")
        if pp.accumulate_steps < 1 or pp.micro_batch_size < 1:
            raise ValueError(f"Strategy.pipeline: accumulate_steps ({pp.accumulate_steps}) and micro_batch_size "
                             f"({pp.micro_batch_size}) must be >= 1")
        if pp.vpp_degree != 1:
            raise ValueError(f"Strategy.pipeline.vpp_degree={pp.vpp_degree}: virtual stages are not supported by "
                             f"to_static here (use gt.pipeline.Pipeline with schedule='interleaved')")
        if gm.enable:
            raise ValueError("Strategy: pipeline and gradient_merge both enabled; the pipeline accumulates over "
                             "pipeline.accumulate_steps micro-batches already (Paddle sets gradient_merge from it)")
    return strategy


def apply_recompute(layer, strategy):
    """recompute.enable: the sublayers named in recompute.checkpoints (default: each direct
    sublayer) run through activation recompute (nn.graph.set_recompute)."""
    if strategy.recompute.enable:
        recompute_sublayers(layer, strategy.recompute.checkpoints, "Strategy.recompute.checkpoints")


def recompute_sublayers(layer, names, what):
    """The sublayers `names` (default: each direct one) of layer run through activation recompute."""
    named = dict(layer.named_modules())
    names = list(names) or [name for name, _ in layer.named_children()]
    missing = [n for n in names if not isinstance(n, str) or n not in named]
    if missing:
        raise ValueError(f"{what} names {missing}, which are no sublayers of the layer "
                         f"(its sublayers: {sorted(n for n in named if n)})")
    for name in names:
        set_recompute(named[name], True)


def accumulation(strategy):
    """(k, avg) of the train step's gradient merge: (1, True) when off."""
    gm = strategy.gradient_merge
    return (gm.k_steps, gm.avg) if gm.enable else (1, True)


class PipelineStep:
    """strategy.pipeline.enable: the layer's direct sublayers grouped by the placement of their
    parameters into stages (in order; a sublayer without parameters joins the stage before it),
    run by gt.pipeline.Pipeline with schedule_mode's schedule (1F1B, FThenB) over
    accumulate_steps micro-batches (or batch / micro_batch_size when accumulate_steps is 1);
    then the optimizer's step and clear_grad: one update per call. eval: the loss of the pipeline's
    forward; predict: {"out0": its output}."""

    def __init__(self, mode, layer, loss, optimizer, config):
        self.mode, self.config, self.optimizer = mode, config, optimizer
        self.stages = _stages(layer)
        self._pipes = {}
        self.loss = loss

    def _pipe(self, rows):
        m = self.config.accumulate_steps
        if m == 1 and self.config.micro_batch_size > 1:
            m = rows // self.config.micro_batch_size
        if rows % m:
            raise ValueError(f"Strategy.pipeline: a batch of {rows} rows cannot be cut into {m} micro-batches")
        pipe = self._pipes.get(m)
        if pipe is None:
            pipe = self._pipes[m] = Pipeline(self.stages, schedule=_SCHEDULES[self.config.schedule_mode],
                                             micro_batches=m, loss_fn=self.loss)
        return pipe

    def program(self, rank=None):
        return (f"DistModel[{self.mode}]: pipelined eagerly ({len(self.stages)} stages, schedule "
                f"{self.config.schedule_mode}); no captured program")

    def __call__(self, x, label=None):
        if self.mode == "predict":
            return {"out0": self._pipe(x.shape[0])(x)}
        if self.mode == "eval":
            return self.loss(self._pipe(x.shape[0])(x), label)
        loss = self._pipe(x.shape[0]).step(x, target=label)
        self.optimizer.step()
        clear = getattr(self.optimizer, "clear_grad", None) or self.optimizer.zero_grad
        clear()
        return loss


def _stages(layer):
    stages, current, where = [], [], None
    for name, child in layer.named_children():
        placements = list(dict.fromkeys(p.placement for p in child.parameters() if p.is_global))
        if len(placements) > 1:
            raise ValueError(f"Strategy.pipeline: sublayer {type(child).__name__} has parameters on "
                             f"{len(placements)} placements; a stage's parameters live on one")
        here = placements[0] if placements else where
        if current and here != where:
            stages.append(Sequential(collections.OrderedDict(current)))
            current = []
        current.append((name, child))
        where = here
    if current:
        stages.append(Sequential(collections.OrderedDict(current)))
    if len(stages) < 2:
        raise ValueError("Strategy.pipeline.enable: the layer's sublayers live on one placement; place its "
                         "stages' parameters on different meshes (dist.shard_tensor / to_global) to pipeline it")
    return stages
