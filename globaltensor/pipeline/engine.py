"""Pipeline: stages on placements, run micro-batch by micro-batch in a schedule's order.

Every rank computes the same event lists from the same global facts (stage placements, the
schedule, the micro-batch count), runs the compute events of the stages it holds and takes
part in the transfers that touch them; a transfer is ordinary boxing between two placements
(an all_to_all over their union). A rank that does not hold a stage knows its tensors by
metadata only (global shape, dtype, placement, SBP: a piece of size 0), worked out by running
the stage on such hollow tensors, which computes nothing and is cached per input layout.
"""
import contextlib
import hashlib

from .. import _native, autograd, creation, grad_buckets, ops
from .. import random as gt_random
from ..distributed import CollectiveError
from ..env import get_rank
from ..placement import placement as Placement
from ..sbp import broadcast, partial_sum
from ..tensor import Tensor
from . import schedules as sched
from .microbatch import Cut, hollow as _hollow, meta as _meta


class PipelineError(RuntimeError):
    """A stage raised, or a rank it exchanges with did: says which stage, micro-batch and action."""


def _sbp_on(t, placement):
    """The SBP a tensor keeps when it moves to `placement`: its own when the meshes have as
    many axes; without the leading axis when it comes from the whole mesh of stage rows;
    broadcast otherwise."""
    if t.placement.ndim == placement.ndim:
        return t.sbp
    if t.placement.ndim == placement.ndim + 1 and t.sbp[0] is not partial_sum:
        return t.sbp[1:]
    return (broadcast,) * placement.ndim


def _move(t, placement, sbp):
    """t boxed to (placement, sbp) by the ranks of both placements; others only learn its
    metadata (they make no call, so no collective waits for them)."""
    me = get_rank()
    if me in t.placement or me in placement:
        with autograd.no_grad():
            return t.detach().to_global(placement=placement, sbp=sbp)
    return _hollow(t.shape, t.dtype, placement, sbp)


class Pipeline:
    """Stages (modules whose parameters live on one placement each) run as a pipeline.

        pipe = gt.pipeline.Pipeline([front, back], schedule="1f1b", micro_batches=8, loss_fn=nn.MSELoss())
        loss = pipe.step(x, target=y)    # forward and backward of every micro-batch; same call on every rank
        out = pipe(x)                    # forward only

    Gradients accumulate to those of the unpipelined model on the whole batch (the loss is the
    batch mean: micro-batches weighted by their size). `placements` (one per stage, None: where
    its parameters live) places stages without parameters.
    """

    def __init__(self, stages, schedule="1f1b", micro_batches=1, loss_fn=None, placements=None):
        self.stages = list(stages)
        if not self.stages:
            raise ValueError("Pipeline needs at least one stage")
        if isinstance(micro_batches, bool) or not isinstance(micro_batches, int) or micro_batches < 1:
            raise ValueError(f"micro_batches must be a positive int, got {micro_batches!r}")
        self.schedule = sched.schedule_from(schedule)
        self.micro_batches = micro_batches
        self.loss_fn = loss_fn
        if placements is not None and len(placements) != len(self.stages):
            raise ValueError(f"placements names {len(placements)} placements for {len(self.stages)} stages")
        self.placements = [self._stage_placement(i, s, None if placements is None else placements[i])
                           for i, s in enumerate(self.stages)]
        self.rank_placements = list(dict.fromkeys(self.placements))  # first-appearance order
        self.stage_ranks = [self.rank_placements.index(p) for p in self.placements]
        overlap = {r for i, p in enumerate(self.rank_placements) for q in self.rank_placements[i + 1:]
                   for r in set(p.rank_list()) & set(q.rank_list())}
        if overlap:
            raise ValueError(f"ranks {sorted(overlap)} are in two different stage placements; stages share ranks "
                             "only by sharing the same placement")
        mine = [i for i, p in enumerate(self.rank_placements) if get_rank() in p]
        self.my_prank = mine[0] if mine else None
        everyone = sorted({r for p in self.rank_placements for r in p.rank_list()})
        self.all_placement = Placement(self.placements[0].type, everyone)
        self._plans, self._metas, self._cuts = {}, {}, {}
        self.plan(micro_batches)  # validated now, on every rank: a bad schedule raises before any step

    # --- set-up ----------------------------------------------------------------------------------

    @staticmethod
    def _stage_placement(i, stage, given):
        """The stage's placement: `given`, else the one its parameters live on."""
        if given is not None:
            if not isinstance(given, Placement):
                raise TypeError(f"placements[{i}] must be a gt.placement, got {given!r}")
            return given
        if any(p.is_local for p in stage.parameters()):
            raise ValueError(f"stage {i} has local parameters: call stage.to_global(placement, sbp) first")
        found = list(dict.fromkeys(p.placement for p in stage.parameters()))
        if len(found) != 1:
            what = "no parameters" if not found else f"parameters on {len(found)} placements ({found})"
            raise ValueError(f"stage {i} has {what}; a stage's parameters live on one placement "
                             "(or pass placements=[...] to Pipeline)")
        return found[0]

    def plan(self, m):
        """(events per pipeline rank, their blocking timeline) for m micro-batches."""
        if m not in self._plans:
            orders = self.schedule.orders(self.stage_ranks, m)
            events = sched.with_transfers(orders, self.stage_ranks, m, sched.simulate(orders, self.stage_ranks, m))
            self._plans[m] = (events, sched.simulate_blocking(events, self.stage_ranks, m))
        return self._plans[m]

    def explain(self, micro_batches=None):
        """Print (on rank 0) and return the schedule as a grid of pipeline ranks x time, with its
        bubble fraction and the activations each rank holds at most. Not collective."""
        m = micro_batches or self.micro_batches
        _, timeline = self.plan(m)
        names = [f"{p.rank_list()}" for p in self.rank_placements]
        head = (f"{type(self.schedule).__name__}: {len(self.stages)} stages on {len(self.rank_placements)} "
                f"pipeline ranks, {m} micro-batches (F = 1, B = 2 time units)")
        text = head + "\n" + timeline.grid() + "\npipeline ranks: " + ", ".join(
            f"{i} = ranks {n}" for i, n in enumerate(names))
        if get_rank() == 0:
            print(text)
        return text

    # --- running ---------------------------------------------------------------------------------

    def __call__(self, x):
        """Forward only: the last stage's output for the whole batch (rows in the batch's order)."""
        with autograd.no_grad():
            run = _Run(self, x, None, forward_only=True)
            run.go()
        return run.output()

    def step(self, x, target=None):
        """Forward and backward of every micro-batch in the schedule's order; returns the loss of
        the whole batch as a global scalar, broadcast on every rank of the pipeline."""
        if self.loss_fn is None or target is None:
            raise ValueError("Pipeline.step needs loss_fn (given to Pipeline(...)) and target=; pipe(x) runs "
                             "forward only")
        run = _Run(self, x, target, forward_only=False)
        run.go()
        return run.loss()

    def cut(self, x, m):
        """How a batch laid out like x is cut into m micro-batches (cached per layout)."""
        key = (_meta(x), m)
        if key not in self._cuts:
            self._cuts[key] = Cut(x, m)
        return self._cuts[key]

    def stage_output_meta(self, s, inp):
        """Metadata of stage s's output for an input laid out like `inp` (run on hollow tensors)."""
        key = (s, _meta(inp))
        if key not in self._metas:
            with autograd.no_grad(), _fork_rng(0, s, -1):
                out = self.stages[s](_hollow(*_meta(inp)))
            self._metas[key] = _meta(out)
        return self._metas[key]

    def state_dict(self):
        """Every stage's parameters and buffers under the stage modules' own names (stages cut
        from one nn.Sequential keep the model's names, so any layout loads it)."""
        out = {}
        for stage in self.stages:
            out.update(stage.state_dict())
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Each stage takes its entries (resharded to its placement); the rest is unexpected."""
        unused = set(state_dict)
        missing = []
        for stage in self.stages:
            own = set(stage.state_dict())
            missing += [k for k in own if k not in state_dict]
            stage.load_state_dict({k: v for k, v in state_dict.items() if k in own}, strict=False)
            unused -= own
        if strict and (missing or unused):
            raise RuntimeError(f"load_state_dict: missing keys {sorted(missing)}, unexpected keys {sorted(unused)}")
        return missing, sorted(unused)


@contextlib.contextmanager
def _fork_rng(step_key, stage, mb):
    """Random ops of (stage, micro-batch) draw from their own stream: the same whichever rank
    runs them and in whatever order; the job's stream is left as it was."""
    saved = gt_random.get_rng_state()
    digest = hashlib.blake2b(repr((saved[0], step_key, stage, mb)).encode(), digest_size=8).digest()
    gt_random.set_rng_state((int.from_bytes(digest, "little"), 0))
    try:
        yield
    finally:
        gt_random.set_rng_state(saved)


class _Run:
    """One pipe.step (or pipe(x)) on this rank."""

    def __init__(self, pipe, x, target, forward_only):
        self.pipe, self.forward_only = pipe, forward_only
        self.last = len(pipe.stages) - 1
        m = pipe.micro_batches
        if not isinstance(x, Tensor) or x.is_local:
            raise TypeError("Pipeline input must be a global tensor (x.to_global(placement, sbp))")
        if target is not None and (not isinstance(target, Tensor) or target.is_local):
            raise TypeError("Pipeline target must be a global tensor")
        if target is not None and target.shape[:1] != x.shape[:1]:
            raise ValueError(f"target has {target.shape[0] if target.ndim else 0} rows, the input {x.shape[0]}")
        if m > x.shape[0]:  # before any collective, on every rank
            raise ValueError(f"micro_batches={m} must be between 1 and the batch size {x.shape[0]} (dim 0 of the input)")
        self.step_key = gt_random.next_counter()  # one draw of the job's stream, on every rank
        first, final = pipe.placements[0], pipe.placements[self.last]
        self.x = _move(x, first, _sbp_on(x, first))
        self.cut = pipe.cut(self.x, m)
        self.target = None if target is None else _move(target, final, _sbp_on(target, final))
        reduction = getattr(pipe.loss_fn, "reduction", "mean")
        self.weights = [1.0 if reduction == "sum" else n / self.cut.n for n in self.cut.sizes]
        events, _ = pipe.plan(m)
        if forward_only:
            events = _forward_events(len(pipe.stages), pipe.stage_ranks, m)
        self.events = [] if pipe.my_prank is None else events[pipe.my_prank]
        self.last_backward = {}  # stage -> its last micro-batch to run backward here (then gradients reduce)
        for ev in self.events:
            if isinstance(ev, sched.Action) and ev.kind == "B":
                self.last_backward[ev.stage] = ev.mb
        self.inputs, self.outputs, self.grads_in, self.grads_out = {}, {}, {}, {}
        self.losses, self.out_metas = {}, {}

    def holds(self, s):
        return get_rank() in self.pipe.placements[s]

    def go(self):
        for ev in self.events:
            try:
                if isinstance(ev, sched.Action):
                    (self.forward if ev.kind == "F" else self.backward)(ev.stage, ev.mb)
                else:
                    self.transfer(ev)
            except PipelineError:
                raise
            except CollectiveError as e:  # the advice about mismatched calls does not apply here
                why = str(e).replace("\n" + _native.collective_hint(), "")
                text = f"rank {get_rank()} at {ev} ({_what(ev)}): a rank it exchanges with failed: {why}"
                raise PipelineError(text) from e
            except Exception as e:  # noqa: BLE001 - any error of a stage becomes every rank's error
                text = f"{_what(ev)} ({ev}) raised on rank {get_rank()}: {type(e).__name__}: {e}"
                _give_up(text)
                raise PipelineError(text) from e
        if not self.forward_only:
            self._fill_missing_grads()

    # --- compute ---------------------------------------------------------------------------------

    def stage_input(self, s, j):
        if s == 0:
            return self.cut.take(self.x, j)
        return self.inputs[(s, j)]

    def forward(self, s, j):
        inp = self.stage_input(s, j)
        with _fork_rng(self.step_key, s, j):
            out = self.pipe.stages[s](inp)
        if not isinstance(out, Tensor) or out.is_local:
            raise TypeError(f"a stage must return one global tensor, got {type(out).__name__}")
        self.outputs[(s, j)] = out
        self.out_metas[(s, j)] = _meta(out)
        if s == self.last and not self.forward_only:
            loss = self.pipe.loss_fn(out, self.cut.take(self.target, j))
            self.losses[j] = loss * self.weights[j] if self.weights[j] != 1.0 else loss

    def backward(self, s, j):
        inp = self.inputs.pop((s, j), None)
        sync = self.last_backward.get(s) == j  # gradients within the stage reduce once per step
        with contextlib.nullcontext() if sync else grad_buckets.no_sync():
            if s == self.last:
                self.losses[j].backward()
            else:
                self.outputs[(s, j)].backward(self.grads_in.pop((s, j)))
        if s == self.last:
            self.losses[j] = self.losses[j].detach()
        self.outputs.pop((s, j))
        if s > 0:
            g = inp.grad
            if g is None:
                g = creation.zeros_like(inp)
            elif g.sbp != inp.sbp:
                g = g.to_global(sbp=inp.sbp)
            self.grads_out[(s, j)] = g

    # --- transfers -------------------------------------------------------------------------------

    def output_meta(self, s, j):
        """(shape, dtype, placement, sbp) of stage s's output for micro-batch j: recorded where the
        stage ran, else from a run of the stage on hollow tensors (never on a rank holding it)."""
        if (s, j) in self.out_metas:
            return self.out_metas[(s, j)]
        if self.holds(s):
            raise RuntimeError(f"internal: rank {get_rank()} needs stage {s}'s output for micro-batch {j} before running it")
        inp = self.stage_input(s, j) if s == 0 else _hollow(*self.input_meta(s, j))
        self.out_metas[(s, j)] = self.pipe.stage_output_meta(s, inp)  # the grad transfer asks again
        return self.out_metas[(s, j)]

    def input_meta(self, s, j):
        """Metadata of stage s's input for micro-batch j (s > 0): the previous output, moved."""
        shape, dtype, pl, sbp = self.output_meta(s - 1, j)
        dst = self.pipe.placements[s]
        return shape, dtype, dst, _sbp_on(_hollow(shape, dtype, pl, sbp), dst)

    def transfer(self, t):
        pl = self.pipe.placements
        if t.kind == "act":
            s, j = t.src_stage, t.mb
            src = self.outputs[(s, j)] if self.holds(s) else _hollow(*self.output_meta(s, j))
            moved = _move(src, pl[t.dst_stage], _sbp_on(src, pl[t.dst_stage]))
            if self.holds(t.dst_stage):
                self.inputs[(t.dst_stage, j)] = moved.requires_grad_(moved.dtype.is_floating
                                                                     and not self.forward_only)
        else:
            s, j = t.src_stage, t.mb  # the gradient of stage s's input goes to stage s - 1
            g = self.grads_out.pop((s, j)) if self.holds(s) else _hollow(*self.input_meta(s, j))
            _, _, _, out_sbp = self.output_meta(t.dst_stage, j)
            moved = _move(g, pl[t.dst_stage], out_sbp)
            if self.holds(t.dst_stage):
                self.grads_in[(t.dst_stage, j)] = moved

    # --- results ---------------------------------------------------------------------------------

    def loss(self):
        """The batch's loss, broadcast on every rank of the pipeline."""
        final = self.pipe.placements[self.last]
        if self.holds(self.last):
            total = self.losses[0]
            for j in range(1, len(self.losses)):
                total = ops.add(total, self.losses[j])
            total = total.to_global(sbp=(broadcast,) * final.ndim)
        else:
            total = _hollow((), self._loss_dtype(), final, (broadcast,) * final.ndim)
        return _move(total, self.pipe.all_placement, (broadcast,))

    def _loss_dtype(self):
        """The loss's dtype, on a rank that does not hold the last stage (cached per layout)."""
        out, target = self.output_meta(self.last, 0), self.cut.take(self.target, 0)
        key = ("loss", out, _meta(target))
        if key not in self.pipe._metas:
            with autograd.no_grad():
                self.pipe._metas[key] = self.pipe.loss_fn(_hollow(*out), target).dtype
        return self.pipe._metas[key]

    def output(self):
        """pipe(x): the last stage's outputs joined in the batch's order (global ops: every rank)."""
        outs = [self.outputs[(self.last, j)] if (self.last, j) in self.outputs
                else _hollow(*self.output_meta(self.last, j)) for j in range(self.cut.m)]
        return self.cut.join(outs)

    def _fill_missing_grads(self):
        """Every rank sees the same parameters with a .grad (so clip_grad_norm_ and optimizers make
        the same collectives everywhere): zeros for parameters a stage did not use, hollow on ranks
        that do not hold the stage."""
        for s, stage in enumerate(self.pipe.stages):
            for p in stage.parameters():
                if p.grad is not None or not p.requires_grad:
                    continue
                p.grad = creation.zeros_like(p) if self.holds(s) else _hollow(*_meta(p))


def _forward_events(n_stages, stage_ranks, m):
    """pipe(x): per pipeline rank, micro-batch after micro-batch, each stage then its transfer."""
    events = [[] for _ in range(max(stage_ranks) + 1)]
    for j in range(m):
        for s in range(n_stages):
            events[stage_ranks[s]].append(sched.Action("F", s, j))
            if s + 1 < n_stages and stage_ranks[s + 1] != stage_ranks[s]:
                t = sched.Transfer("act", s, s + 1, j, (stage_ranks[s], stage_ranks[s + 1]))
                events[stage_ranks[s]].append(t)
                events[stage_ranks[s + 1]].append(t)
    return events


def _what(ev):
    if isinstance(ev, sched.Action):
        return f"{'forward' if ev.kind == 'F' else 'backward'} of stage {ev.stage}, micro-batch {ev.mb}"
    what = "activation" if ev.kind == "act" else "gradient"
    return f"sending micro-batch {ev.mb}'s {what} from stage {ev.src_stage} to stage {ev.dst_stage}"


def _give_up(text):
    """Peers waiting for this rank in a collective fail now, with `text` (no timeout to wait out)."""
    from ..distributed.world import world
    try:
        world().node.give_up(text)
    except Exception:  # noqa: BLE001 - a world of one has no peers to tell
        pass
