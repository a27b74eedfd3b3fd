"""Static programs on the parameter server: the job's spec from a program, and a program's runs against a Client.

fleet (PS mode) and fluid's DistributeTranspiler (pserver mode) call these. While a program is
attached to a globaltensor.ps Client, Executor.run of it runs the forward and the backward, the
program's update is not run: sync / async push the dense gradients and the sparse rows' summed
gradients and pull the dense values the servers hold after the step; GEO runs the update locally
(SGD) and every k_steps pushes the parameters' deltas since the last pull, then pulls. Its
sparse_embedding lookups pull the batch's unique rows from the client. Detached, the program
runs in one process (its sparse tables local, seeded as the servers' rows).
"""
import numpy as np

__all__ = ["job_spec", "rule_of", "initial_values", "dense_parameters", "attach", "detach", "finish", "PSState"]

MODES = ("sync", "async", "geo")


def rule_of(optimizer):
    """The globaltensor.ps Rule the servers run for a Paddle optimizer (SGD, Momentum, Adam, Adagrad)."""
    from ...ps.spec import Rule
    kind = type(optimizer).__name__.replace("Optimizer", "").lower()
    d = getattr(optimizer, "defaults", {})
    lr = d.get("lr", getattr(optimizer, "_learning_rate", None))
    if not isinstance(lr, (int, float)):
        raise ValueError(f"parameter server: the servers run a fixed learning rate; {type(optimizer).__name__} has "
                         f"{type(lr).__name__} (an LRScheduler is not served)")
    if any(g.get("lr_scale", 1.0) != 1.0 for g in getattr(optimizer, "param_groups", ())):
        raise ValueError("parameter server: a ParamAttr learning_rate factor is not served (the servers run one "
                         "learning rate per job)")
    if d.get("weight_decay"):
        raise ValueError(f"parameter server: {type(optimizer).__name__} with weight_decay is not served (the "
                         f"servers' rules have none)")
    if kind == "sgd":
        params = {}
    elif kind == "momentum":
        if d.get("nesterov"):
            raise ValueError("parameter server: Momentum(use_nesterov=True) is not served")
        params = {"momentum": float(d.get("momentum", 0.9))}
    elif kind == "adam":
        beta1, beta2 = d.get("betas", (0.9, 0.999))
        params = {"beta1": float(beta1), "beta2": float(beta2), "epsilon": float(d.get("eps", 1e-8))}
    elif kind == "adagrad":
        params = {"epsilon": float(d.get("eps", d.get("epsilon", 1e-6))),
                  "initial_accumulator": float(d.get("initial_accumulator_value", 0.0))}
    else:
        raise ValueError(f"parameter server: the servers run SGD, Momentum, Adagrad or Adam; got "
                         f"{type(optimizer).__name__}")
    return Rule(kind, float(lr), tuple(sorted(params.items())))


def dense_parameters(program):
    """The program's trainable parameters that are not sparse tables, in program order."""
    return [p for p in program.parameters if p.requires_grad]


def _name(p):
    return getattr(p, "name", None) or "param"


def job_spec(program, optimizer, mode, k_steps=0, servers=(), trainers=1, secret=b"", **fields):
    """The JobSpec of a program: dense = its trainable parameters (shapes, dtypes), sparse = its
    sparse_embedding tables, the rule from the optimizer. fields: JobSpec's other fields
    (min_block_size, slice_var_up, split_method, timeout, dead_after)."""
    from ...ps.spec import DenseSpec, JobSpec
    if mode not in MODES:
        raise ValueError(f"parameter server: mode must be one of {MODES}, got {mode!r}")
    rule = rule_of(optimizer)
    if mode == "geo" and rule.kind != "sgd":
        raise ValueError(f"parameter server: GEO mode trains locally with SGD (as Paddle's GEO-SGD); got "
                         f"{type(optimizer).__name__}")
    if mode == "geo" and (not isinstance(k_steps, int) or k_steps < 1):
        raise ValueError(f"parameter server: GEO mode needs k_steps >= 1, got {k_steps!r}")
    servers = tuple(s.strip() for s in servers.split(",")) if isinstance(servers, str) else tuple(servers)
    dense = tuple(DenseSpec(_name(p), tuple(int(n) for n in p.shape), p.dtype.name) for p in dense_parameters(program))
    sparse = tuple(t.spec() for t in program.sparse_tables.values())
    job = JobSpec(servers=servers, trainers=int(trainers), mode=mode, rule=rule, dense=dense, sparse=sparse,
                  k_steps=int(k_steps), secret=secret, **fields)
    job.validate()
    return job


def initial_values(program, copy=True):
    """{name: array}: the dense parameters' values now (after the startup program has run, or their
    initializers' values where it has not: a server's). copy=False: the
    arrays themselves, for a caller that copies what it keeps (a Server copies its blocks)."""
    from .param_init import materialize
    take = (lambda a: np.array(a, copy=True)) if copy else np.asarray
    params = dense_parameters(program)
    for p in params:  # a server that never runs the startup program: its initializers run now
        materialize(p)
    return {_name(p): take(p._local) for p in params}


def attach(program, client, mode=None, k_steps=None, ops=None, connect=False):
    """Executor.run of program (and of its clones) runs against client from now on: at the first
    run the dense parameters take the servers' values (connect=True: the client connects first,
    else the caller has connected it, as fleet's init_worker). mode / k_steps default to
    client.job's; ops: the Operators the update prints as (the transpiler's send / recv)."""
    job = getattr(client, "job", None)
    mode = mode or getattr(job, "mode", "sync")
    k_steps = k_steps if k_steps is not None else getattr(job, "k_steps", 0)
    if mode not in MODES:
        raise ValueError(f"attach: mode must be one of {MODES}, got {mode!r}")
    if mode == "geo" and k_steps < 1:
        raise ValueError(f"attach: GEO mode needs k_steps >= 1, got {k_steps}")
    state = PSState(program, client, mode, k_steps)
    state.ops, state.connect = ops, connect
    program.ps[0] = state
    for ins in program.instrs:
        if ins.kind == "step" and hasattr(ins.fn, "remote"):
            ins.fn.remote = state.step
    program._runs.clear()
    return state


def detach(program):
    """The program runs in one process again (its update local, its sparse tables local). GEO: the
    local steps not pushed yet are pushed first (fleet's stop_worker detaches, then stops)."""
    state = program.ps[0]
    if state is not None:
        state.settle()
    if state is not None and state.mode == "geo" and state.unpushed:
        state._push_deltas()
    program.ps[0] = None
    for ins in program.instrs:
        if ins.kind == "step" and hasattr(ins.fn, "remote"):
            ins.fn.remote = None
    program._runs.clear()
    return state


def finish(program):
    """This trainer is done (Executor.close, fleet's stop_worker): GEO pushes the deltas of the steps
    since its last push; async and GEO wait at a barrier of the trainers and pull the servers' final
    values (every trainer ends with them; sync trainers take the last step's: settle); then the client
    stops. Once per attachment; None where the program is not attached."""
    state = program.ps[0]
    if state is not None:
        state.finish()
    return state


def ask_fed_rows(state, feed):
    """Sync mode, before a run: for each table whose first training lookup reads fed ids only, those ids
    checked, their unique ids' rows asked for (Client.pull_sparse_ask, not waited for). Returns
    [(table, fed ids, unique, inverse, request)]; the lookup takes the rows if its ids are these."""
    program, found, seen = state.program, [], set()
    fed_regs = {r: n for n, r in program.feeds.items()}
    training = {id(lk): lk for _, lk in program.sparse_lookups if not lk.is_test}
    for ins in program.instrs:
        lookup = training.get(id(ins.fn))
        if lookup is None or lookup.table.name in seen:
            continue
        seen.add(lookup.table.name)
        names = [fed_regs.get(r) for r in ins.ins]
        if not all(n is not None and n in feed for n in names):
            continue
        found.append((lookup.table, np.concatenate([lookup._checked(_fed(feed[n])) for n in names])))
    asked = []  # every table's ids checked (ValueError) before any is asked for
    for table, fed in found:
        every, inv = np.unique(fed, return_inverse=True)
        asked.append((table, fed, every, inv, state.client.pull_sparse_ask(table.name, every)))
    return asked


def _fed(value):
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value)


class PSState:
    """A program's link to its client: the first pull, the step's pushes and pulls, GEO's counters."""

    def __init__(self, program, client, mode, k_steps):
        self.program, self.client, self.mode, self.k_steps = program, client, mode, k_steps
        self.params = {_name(p): p for p in dense_parameters(program)}
        self.started, self.finished, self.steps = False, False, 0
        self.runs = 0  # Executor.run calls: a fused pull serves the lookups of its run only
        self.unpushed = 0  # GEO: local steps since the last push of deltas
        self.ops = None  # what the update prints as (static/block.py), where the transpiler gives it
        self.connect = False  # whether the first run connects the client
        self.base = {}  # GEO: the dense values of the last pull
        self.rows = {}  # GEO: table -> HeldRows (the rows pulled since the last push, trained locally)
        self.dense_due = False  # sync: the step's dense values are asked for, not taken yet (settle() takes them)

    def before_run(self, feed=None, program=None):
        """The first run starts from the servers' dense values (as Paddle's trainer startup recv). Sync: the
        previous step's values are taken now, after this run's sparse rows are asked for (feed: the run's feed,
        whose ids give them; only when the run is of the attached program itself, not of a clone, whose lookups
        may be is_test): one wait for both, and the wait for the other trainers overlapped the caller's work
        between the runs."""
        self.runs += 1
        if not self.started:
            if self.connect:
                self.client.connect()
            self._pull_dense()
            self.started = True
        elif self.dense_due:
            asked = ask_fed_rows(self, feed) if feed and program is self.program else []
            self.settle()
            for table, parts, every, inv, pull in asked:
                table.prepulled = (self, self.runs, parts, every, inv, self.client.pull_sparse_wait(pull))

    def settle(self):
        """Sync: the dense parameters take the values of the last step (asked for by its end); elsewhere nothing.
        Every run, Executor.close and fleet's stop_worker call it first."""
        if self.dense_due:
            self.dense_due = False
            self._pull_dense()

    def finish(self):
        if self.finished:
            return
        self.finished = True
        self.settle()
        if self.mode == "geo" and self.unpushed:
            self._push_deltas()
        if self.started and self.mode != "sync":
            self.client.barrier()
            self._pull_dense()
        self.client.stop()

    def _pull_dense(self):
        if self.mode == "async" and self.started and hasattr(self.client, "pull_dense_if_new"):
            values = self.client.pull_dense_if_new(list(self.params))
            if values is None:  # no refresh came since: the parameters hold its values already
                return
        else:
            values = self.client.pull_dense(list(self.params))  # fresh arrays, assembled from the blocks: ours
        for name, p in self.params.items():
            p._local = np.asarray(values[name], dtype=p._local.dtype).reshape(p._local.shape)
            if self.mode == "geo":  # the base of GEO's deltas (sync and async push gradients, need none)
                self.base[name] = np.array(p._local, copy=True)

    def step(self, update):
        """In place of the program's update (update: its _Update): the PS step of the mode."""
        if self.mode == "geo":
            return self._geo_step(update)
        grads = {name: np.asarray(p.grad._local) for name, p in self.params.items() if p.grad is not None}
        self.client.push_dense(grads)
        for name, table in self.program.sparse_tables.items():
            ids, rows = table.take_grads()
            if len(ids):
                self.client.push_sparse(name, ids, rows)
        update.optimizer.clear_grad(set_to_zero=False)
        if self.mode == "sync" and hasattr(self.client, "end_step"):
            self.client.end_step()  # the values are taken by the next run (settle): the wait overlaps the caller
            self.dense_due = True
        else:
            self._pull_dense()

    def _geo_step(self, update):
        update.optimizer.step()
        update.optimizer.clear_grad(set_to_zero=False)
        lr = update.optimizer.get_lr()
        for name, table in self.program.sparse_tables.items():
            ids, grads = table.take_grads()
            self._geo_rows_update(name, ids, -lr * grads)
        self.steps, self.unpushed = self.steps + 1, self.unpushed + 1
        if self.unpushed == self.k_steps:
            self._push_deltas()

    def _push_deltas(self):
        """GEO: local - last pulled, dense and the rows held; then the servers' values again."""
        self.client.push_dense_delta({n: p._local - self.base[n] for n, p in self.params.items()})
        for name, held in self.rows.items():
            ids, delta = held.deltas()
            if len(ids):
                self.client.push_sparse_delta(name, ids, delta)
        self.rows, self.unpushed = {}, 0  # the next lookups pull the servers' rows again
        self._pull_dense()

    def geo_rows(self, table, uniq, pull):
        """GEO lookups: the rows of uniq held locally since the last push; the others pulled
        (pull(ids) -> rows) and held from now on, their pulled value the base of the delta."""
        held = self.rows.get(table)
        if held is None:
            held = self.rows[table] = HeldRows()
        return held.get(uniq, pull)

    def _geo_rows_update(self, table, ids, delta):
        if len(ids):
            self.rows[table].add(ids, delta)


class HeldRows:
    """GEO: the rows of one table a trainer holds between pushes: id -> (local value, value pulled),
    found through a vectorised hash index (globaltensor.ps's), the arrays grown by doubling."""

    def __init__(self):
        from ...ps._idindex import IdIndex
        self.index, self.rows, self.base = IdIndex(), None, None

    def get(self, uniq, pull):
        """The local rows of the distinct ids uniq; the ids not held yet are pulled (pull(ids) -> rows) first."""
        at = self.index.lookup(uniq)
        fresh = at < 0
        if fresh.any():
            got = np.asarray(pull(uniq[fresh]))
            new = self.index.insert(uniq[fresh])
            self._grow(len(self.index), got)
            self.rows[new] = got
            self.base[new] = got
            at[fresh] = new
        return self.rows[at]

    def add(self, ids, delta):
        """Local rows of the distinct held ids += delta (the local SGD step)."""
        self.rows[self.index.lookup(ids)] += delta.astype(self.rows.dtype, copy=False)

    def deltas(self):
        """(ids, local - pulled) of every row held."""
        n = len(self.index)
        if self.rows is None:
            return np.zeros(0, np.int64), None
        return self.index.ids.copy(), self.rows[:n] - self.base[:n]

    def _grow(self, n, like):
        if self.rows is not None and n <= len(self.rows):
            return
        size = max(n, 2 * (0 if self.rows is None else len(self.rows)), 1024)
        rows, base = (np.empty((size,) + like.shape[1:], like.dtype) for _ in range(2))
        if self.rows is not None:
            old = len(self.rows)
            rows[:old], base[:old] = self.rows, self.base
        self.rows, self.base = rows, base
