"""gt.nn.Graph and gt.jit.trace: one program captured per input signature, replayed after."""
import logging
import os

from .. import hooks, scope
from ..tensor import Tensor
from . import amp_step, passes
from .accumulate import run_micro_batches
from .capture import CaptureError, Recorder
from .config import GraphConfig
from .replay import compile_program

log = logging.getLogger("globaltensor.graph")


class Captured:
    """Programs cached by input signature (shapes, dtypes, placements, SBPs, other arguments):
    the first call of a signature runs eagerly while recording, later ones replay. A new
    signature captures again, logging what changed; past `max_programs` it raises with the history."""

    max_programs = 8

    def _cache(self):
        found = self.__dict__.get("_gt_programs")
        if found is None:
            found = self.__dict__["_gt_programs"] = {"programs": {}, "history": [], "last": None}
        return found

    def _call(self, args, kwargs):
        if os.environ.get("GLOBALTENSOR_GRAPH", "1") == "0" or scope.recorder() is not None or self._eager():
            return self._body(args, kwargs)  # eager (debugging, a grad scaler), or inside another graph's capture
        if not kwargs and all(type(a) is Tensor for a in args):  # the common call: tensors only
            tensors = args
            key = (tuple(_tensor_key(a) for a in args), self._mode())
        else:
            tensors = []
            key = (_flatten((args, kwargs), tensors, None, None), self._mode())
        cache = self._cache()
        entry = cache["programs"].get(key)
        if entry is None:
            described = []
            _flatten((args, kwargs), [], "", described)
            return self._capture(cache, key, list(tensors), described, args, kwargs)
        program, tree = entry
        return _unflatten(tree, program.fn(*[t._local for t in tensors]))

    def _capture(self, cache, key, tensors, described, args, kwargs):
        reason = _reason(cache["history"][-1][0] if cache["history"] else None, described)
        label = f"{self._label()} #{len(cache['programs']) + 1}"
        if len(cache["programs"]) >= self.max_programs:
            history = "; ".join(f"{i + 1}. {r}" for i, (_, r) in enumerate(cache["history"]))
            raise RuntimeError(f"{self._label()}: a new input signature ({reason}) after {len(cache['programs'])} "
                               f"captured programs, its bound (max_programs); the captures so far: {history}. Give "
                               f"the graph inputs of fixed shapes and layouts, or raise max_programs")
        log.info("%s: capturing (%s)", label, reason)
        rec = Recorder(tensors, self._state_names())
        with scope.scoped(recorder=rec):
            out = self._body(args, kwargs)
            outputs = []
            tree = _flatten_output(out, outputs)
            program = rec.finish(outputs, label)
        program.captured = program.copy()  # the data form, before planning changes it (save, passes)
        passes.plan(program)
        compile_program(program)
        result = _unflatten(tree, [program.regs[r].array for r in program.outputs])
        for reg in program.regs + program.captured.regs:  # the arrays capture saw: planning is done
            reg.array = None
        program.tree = tree
        cache["programs"][key] = (program, tree)
        cache["history"].append((described, reason))
        cache["last"] = program
        return result

    # --- what a subclass gives ----------------------------------------------------------------
    def _body(self, args, kwargs):
        raise NotImplementedError

    def _label(self):
        return type(self).__name__

    def _eager(self):
        return False

    def _mode(self):
        return None

    def _state_names(self):
        return {}

    # --- reading it ---------------------------------------------------------------------------
    @property
    def captures(self):
        """Why each program was captured, in order (the first: "first call")."""
        return [reason for _, reason in self._cache()["history"]]

    def program(self, rank=None):
        """The latest captured program as text: the serial program (global shapes and SBPs), or
        with rank=r, that rank's (piece shapes, collectives, buffer reuse and frees)."""
        last = self._cache()["last"]
        if last is None:
            return f"{self._label()}: no program captured yet (call it once)"
        return last.text(rank)

    def __repr__(self):
        return self.program()


class Graph(Captured):
    """OneFlow's nn.Graph: subclass it, set modules as attributes, write build(); add_optimizer
    makes every call also run the optimizer's step and clear the gradients. Calling it captures
    (first call of a signature) or replays."""

    def __init__(self):
        self._optimizers = []
        self._config = GraphConfig()

    @property
    def config(self):
        """This graph's GraphConfig (OneFlow's nn.Graph.config): enable_amp, enable_zero,
        set_gradient_accumulation_steps, ... (globaltensor/graph/config.py)."""
        found = self.__dict__.get("_config")
        if found is None:  # a subclass that skipped Graph.__init__
            found = self.__dict__["_config"] = GraphConfig()
        return found

    def add_optimizer(self, optimizer, *, lr_sch=None):
        """After build() (which calls backward), each call runs optimizer.step(), zero_grad() and
        lr_sch.step() when given, as OneFlow's nn.Graph."""
        self.__dict__.setdefault("_optimizers", []).append((optimizer, lr_sch))
        self.config.training = True

    def set_grad_scaler(self, grad_scaler):
        """OneFlow's Graph.set_grad_scaler(flow.amp.GradScaler(...)): build's backward() seeds the
        loss scale, the optimizers step through the scaler (unscale, skip on an inf or nan on any
        rank) and it updates after each call. The skip depends on the values, so such a graph runs
        its step eagerly (no capture)."""
        self.__dict__["_grad_scaler"] = grad_scaler

    def _eager(self):
        return self.__dict__.get("_grad_scaler") is not None

    def build(self, *args, **kwargs):
        raise NotImplementedError("a Graph subclass defines build(*inputs)")

    def __call__(self, *args, **kwargs):
        if self.config.zero_enabled:
            self._turn_zero_on()
        return self._call(args, kwargs)

    def _turn_zero_on(self):
        """config.enable_zero: each optimizer's ZeRO stage along mesh axis 0 (zero.attach), before
        the first capture; a stage changed later applies to the optimizers not yet sharded."""
        from .. import zero
        config = self.config
        for optimizer, _ in self.__dict__.get("_optimizers", ()):
            if getattr(optimizer, "_zero", None) is None:
                zero.attach(optimizer, config.zero_stage, 0, config.zero_shard_min_size)

    def _body(self, args, kwargs):
        config, optimizers = self.config, self.__dict__.get("_optimizers", ())
        with amp_step.amp_scope(self):  # enable_amp, a grad scaler (graph/amp_step.py)
            if config.gradient_accumulation_steps > 1 and optimizers:
                params = [p for optimizer, _ in optimizers for group in optimizer.param_groups for p in group["params"]]
                out = run_micro_batches(self.build, args, kwargs, config.gradient_accumulation_steps, params,
                                        config.gradient_accumulation_avg)
            else:
                out = self.build(*args, **kwargs)
        for optimizer, lr_sch in self.__dict__.get("_optimizers", ()):
            amp_step.optimizer_step(self, optimizer)  # gt.optim's: one update instruction per parameter
            rec = scope.recorder()
            names = [rec.name_of(p) for group in optimizer.param_groups for p in group["params"]] if rec else []
            hooks.effect(f"{type(optimizer).__name__}.zero_grad", _ClearGrads(optimizer), {"clear_grads": names})
            if lr_sch is not None:
                lr_sch.step()  # recorded (hooks.effect): the next replay's updates read its lr
        amp_step.finish_step(self)
        return out

    def state_dict(self, destination=None):
        """OneFlow's nn.Graph.state_dict: {module attribute: that module's state_dict()}. The
        optimizers' states stay with the optimizers (optimizer.state_dict())."""
        destination = {} if destination is None else destination
        for name, m in self._modules():
            destination[name] = m.state_dict()
        return destination

    def load_state_dict(self, state_dict, strict=True):
        """Each module attribute's entry loaded into that module (OneFlow's nn.Graph.load_state_dict);
        with strict, a key that names no module of the graph raises KeyError."""
        modules = dict(self._modules())
        for name, item in state_dict.items():
            if name in modules:
                modules[name].load_state_dict(item, strict)
            elif strict:
                raise KeyError(f"load_state_dict: {name!r} is no module of this graph (its modules: "
                               f"{sorted(modules)})")

    def _modules(self):
        return [(name, m) for name, m in self.__dict__.items() if hasattr(m, "named_parameters") and hasattr(m, "training")]

    def _mode(self):
        """The train/eval flags of the graph's modules (dropout draws or not: another program)."""
        return tuple(m.training for _, m in self._modules())

    def _state_names(self):
        names = {}
        for attr, m in self._modules():
            for name, t in list(m.named_parameters()) + list(getattr(m, "named_buffers", lambda: [])()):
                names.setdefault(id(t), f"{attr}.{name}")
        return names


class _ClearGrads:
    """optimizer.zero_grad(set_to_none=True) after add_optimizer's step (nn is a layer above graph)."""

    def __init__(self, optimizer):
        self.optimizer = optimizer

    def __call__(self):
        for group in self.optimizer.param_groups:
            for p in group["params"]:
                p.grad = None


class Traced(Captured):
    """gt.jit.trace(fn): fn(*tensors) captured per signature and replayed."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "fn")
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(self, *args, **kwargs):
        return self._call(args, kwargs)

    def _body(self, args, kwargs):
        return self.fn(*args, **kwargs)

    def _label(self):
        return f"trace({self.__name__})"


def trace(fn):
    """fn, a function of global (or local) tensors, as a captured program: the first call with an
    input signature runs fn eagerly while recording; later calls replay the program."""
    return Traced(fn)


# --- signatures -------------------------------------------------------------------------------

def _tensor_text(t):
    if t.is_local:
        return f"local tensor {tuple(t.shape)} {t.dtype.name}" + (" requires_grad" if t.requires_grad else "")
    return (f"tensor {tuple(t.shape)} {t.dtype.name} on {t.placement} sbp {t.sbp}"
            + (" requires_grad" if t.requires_grad else ""))


def _tensor_key(t):
    """A tensor argument's part of a program's key (both the all-tensors fast path and _flatten
    use it): a local tensor's shape, dtype, device and requires_grad; a global one's layout."""
    if t._placement is None:
        return ("T", tuple(t._global_shape), t._dtype.name, str(t.device), t.requires_grad)
    return ("G", t._layout or t.layout(), t.requires_grad)


def _flatten(value, tensors, path, described):
    """The hashable key of an argument tree; tensors are appended, their layout in the key; with
    `described` (a list), each leaf's (path, text) too (for the reasons of a capture)."""
    if isinstance(value, Tensor):
        tensors.append(value)
        if described is not None:
            described.append((path, _tensor_text(value)))
        return _tensor_key(value)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__,) + tuple(_flatten(v, tensors, _at(path, i), described)
                                               for i, v in enumerate(value))
    if isinstance(value, dict):
        return ("dict",) + tuple((k, _flatten(v, tensors, _at(path, repr(k)), described)) for k, v in value.items())
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"graph argument {path or 'value'}: {type(value).__name__} is neither a tensor nor a hashable "
                        f"value (the graph keys its programs by its arguments)") from None
    if described is not None:
        described.append((path, repr(value)))
    return ("V", type(value).__name__, value)


def _at(path, index):
    return None if path is None else f"{path}[{index}]"


def _reason(before, now):
    """What differs between two signatures' descriptions, as text."""
    if before is None:
        return "first call"
    old, new = dict(before), dict(now)
    parts = [f"{_path(p)}: {old[p]} -> {new[p]}" for p in new if p in old and old[p] != new[p]]
    parts += [f"{_path(p)}: new, {new[p]}" for p in new if p not in old]
    parts += [f"{_path(p)}: gone" for p in old if p not in new]
    return "; ".join(parts) or "the modules' train/eval mode changed"


def _path(p):
    """"[0][1]" -> "args[1]", "[1]['lr']" -> "kwargs['lr']"."""
    if p.startswith("[0]"):
        return "args" + p[3:]
    return "kwargs" + p[3:]


def _flatten_output(value, tensors):
    """The output tree with tensors replaced by their position in `tensors` (and layout)."""
    if isinstance(value, Tensor):
        tensors.append(value)
        return ("T", len(tensors) - 1, value.layout() if value.is_global else None)
    if isinstance(value, (tuple, list)):
        return (type(value),) + tuple(_flatten_output(v, tensors) for v in value)
    if isinstance(value, dict):
        return (dict,) + tuple((k, _flatten_output(v, tensors)) for k, v in value.items())
    return ("V", value)


def _unflatten(tree, pieces):
    head = tree[0]
    if head == "T":
        _, i, lay = tree
        return Tensor(pieces[i]) if lay is None else Tensor._wrap(pieces[i], lay)
    if head == "V":
        return tree[1]
    if head is dict:
        return {k: _unflatten(v, pieces) for k, v in tree[1:]}
    items = [_unflatten(v, pieces) for v in tree[1:]]
    return head(*items) if hasattr(head, "_fields") else head(items)


__all__ = ["CaptureError", "Graph", "Traced", "trace"]
