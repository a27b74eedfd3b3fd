"""dist.to_static -> DistModel: Paddle's whole-program training face, built on graph mode (one
gt.nn.Graph per mode, captured on the first call and replayed)."""
from ...autograd import no_grad
from ...env import get_rank
from ...graph import Graph
from .auto_parallel import replicate_dense_parameters
from .auto_parallel.sharding_stages import apply_strategy_sharding
from .strategy import Strategy  # noqa: F401 - dist.Strategy is re-exported from here (_surface)
from .strategy_run import PipelineStep, accumulation, apply_recompute, checked
from .strategy_amp import amp_policy, amp_scaler, apply_amp
from ..amp.auto_cast import MasterWeights


class _Step(Graph):
    """One mode's step over the layer: train (loss, backward, the optimizer's update), eval
    (the loss), predict ({"out0": ...})."""

    def __init__(self, mode, layer, loss, optimizer, accumulate=(1, True), amp=None):
        super().__init__()
        self.mode, self.layer, self.loss_fn = mode, layer, loss
        self._amp = amp
        if mode == "train":
            self.add_optimizer(optimizer)
            self.config.set_gradient_accumulation_steps(accumulate[0], avg=accumulate[1])
            if amp is not None and amp.enable:
                scaler = amp_scaler(amp)
                if scaler is not None:
                    self.set_grad_scaler(scaler)

    def _eager(self):
        """A grad scaler (its skip depends on the values) or O2's master weights (their update
        writes the parameters outside the dispatcher): the step runs eagerly."""
        return super()._eager() or any(isinstance(getattr(optimizer, "step", None), MasterWeights)
                                       for optimizer, _ in self.__dict__.get("_optimizers", ()))

    def _amp_policy(self):
        """Strategy.amp: the build under Paddle's auto_cast lists (level, dtype, custom lists)."""
        return amp_policy(self._amp, self.__dict__.get("_grad_scaler"))

    def _label(self):
        return f"DistModel[{self.mode}]"

    def build(self, *inputs):
        if self.mode == "train":
            *xs, label = inputs
            loss = self.loss_fn(self.layer(*xs), label)
            loss.backward()
            return loss
        with no_grad():
            if self.mode == "eval":
                *xs, label = inputs
                return self.loss_fn(self.layer(*xs), label)
            out = self.layer(*inputs)
            outs = out if isinstance(out, (tuple, list)) else (out,)
            return {f"out{i}": o for i, o in enumerate(outs)}


class DistModel:
    """The layer, loss and optimizer as one program per mode. train(): each call updates the
    parameters and returns the loss; eval(): returns the loss; predict(): returns {"out0": ...}.
    dist_main_program(mode) / serial_main_program(mode) print the captured programs (this
    rank's, or the serial one); the startup programs list the parameters' layouts. The
    strategy's recompute, gradient_merge (train: the batch cut into k_steps micro-batches, one
    update; the loss returned is their mean), pipeline (train: eager, on gt.pipeline), amp
    (Paddle's O1/O2 lists, float16 loss scaling) and sharding (ZeRO stage 1-3 of the optimizer
    along the mesh's "dp" dim) act here: docs/big_models.md."""

    def __init__(self, layer, loader=None, loss=None, optimizer=None, strategy=None, metrics=None):
        strategy = checked(strategy)
        placement = _mesh_of(layer, loader)
        if placement is not None:  # dense parameters run replicated on the model's mesh (Paddle's rule)
            replicate_dense_parameters(layer, placement)
        self._layer, self._loss, self._optimizer = layer, loss, optimizer
        self._loader, self._strategy = loader, strategy
        self._steps = {}
        apply_recompute(layer, strategy)
        apply_amp(layer, optimizer, strategy)
        apply_strategy_sharding(optimizer, strategy.sharding)  # ZeRO (auto_parallel/sharding_stages.py)
        if optimizer is not None and loss is not None:
            self.train()
        elif loss is not None:
            self.eval()
        else:
            self.predict()

    def train(self):
        if self._optimizer is None or self._loss is None:
            raise RuntimeError("DistModel.train(): to_static needs both loss and optimizer for the train mode")
        self._mode = "train"
        self._layer.train()

    def eval(self):
        if self._loss is None:
            raise RuntimeError("DistModel.eval(): to_static needs a loss for the eval mode")
        self._mode = "eval"
        self._layer.eval()

    def predict(self):
        self._mode = "predict"
        self._layer.eval()

    def __call__(self, *inputs):
        step = self._steps.get(self._mode)
        if step is None:
            step = self._steps[self._mode] = self._new_step(self._mode)
        out = step(*inputs)
        if self._mode == "train" and isinstance(step, _Step) and step.config.gradient_accumulation_steps > 1:
            # gradient merge: the step gave one loss per micro-batch
            out = out.mean()
        return out

    def _new_step(self, mode):
        if self._strategy.pipeline.enable:
            return PipelineStep(mode, self._layer, self._loss, self._optimizer, self._strategy.pipeline)
        return _Step(mode, self._layer, self._loss, self._optimizer, accumulation(self._strategy), self._strategy.amp)

    def _step(self, mode):
        step = self._steps.get(mode or self._mode)
        if step is None:
            raise RuntimeError(f"DistModel: no {mode or self._mode} program yet (call the model once in that mode)")
        return step

    def dist_main_program(self, mode=None):
        """This rank's program of the mode (piece shapes, collectives, buffer reuse, peak memory)."""
        return self._step(mode).program(rank=get_rank())

    def serial_main_program(self, mode=None):
        """The mode's program on global tensors (global shapes and SBPs)."""
        return self._step(mode).program()

    def dist_startup_program(self, mode=None):
        """The parameters each rank holds: name, global and piece shape, placement, SBP."""
        from ...layout import local_shape
        lines = [f"startup program, rank {get_rank()}:"]
        for name, p in self._layer.named_parameters():
            if p.is_global:
                coord = p.placement.mesh_coord(get_rank())
                piece = local_shape(p.shape, p.placement.hierarchy, p.sbp, coord) if coord is not None else None
                lines.append(f"  {name}: {tuple(p.shape)} piece {piece} on {p.placement} sbp {p.sbp}")
            else:
                lines.append(f"  {name}: {tuple(p.shape)} local")
        return "\n".join(lines)

    def serial_startup_program(self, mode=None):
        lines = ["startup program:"]
        lines += [f"  {name}: {tuple(p.shape)} {p.dtype.name}" for name, p in self._layer.named_parameters()]
        return "\n".join(lines)

    def state_dict(self, mode="all"):
        state = {}
        if mode in ("all", "param"):
            state.update(self._layer.state_dict())
        if mode in ("all", "opt") and self._optimizer is not None:
            state.update({f"opt.{k}": v for k, v in _flat(self._optimizer.state_dict()).items()})
        return state

    def set_state_dict(self, state_dict):
        self._layer.load_state_dict({k: v for k, v in state_dict.items() if not k.startswith("opt.")}, strict=False)


def _mesh_of(layer, loader):
    """The placement of the layer's first distributed parameter, else of the loader's first mesh."""
    for p in layer.parameters():
        if p.is_global:
            return p.placement
    meshes = getattr(loader, "meshes", None)
    return meshes[0].placement if meshes else None


def _flat(state, prefix=""):
    out = {}
    for k, v in state.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def to_static(layer, loader=None, loss=None, optimizer=None, strategy=None):
    """The layer (with its loss and optimizer) as a DistModel: graph mode with Paddle's face."""
    return DistModel(layer, loader, loss, optimizer, strategy)
