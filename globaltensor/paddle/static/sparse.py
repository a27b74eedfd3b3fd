"""sparse_embedding: a recorded lookup whose rows come from a parameter-server table (or a local one)."""
import itertools

import numpy as np

from .recorder import Variable, meta_array
from .row_grads import SparseGradSink, summed
from .sparse_init import init_spec

_TABLE_CLASSES = ("CommonSparseTable", "SSDSparseTable", "MemorySparseTable")
_ENTRIES = ("ProbabilityEntry", "CountFilterEntry", "ShowClickEntry")
_names = itertools.count()


class SparseTableState:
    """One sparse table of a program: its SparseSpec's fields, the ids and row gradients of the
    current run (gathered over the table's lookups), and the local table of a one-process run."""

    def __init__(self, name, vocab, dim, init, seed, entry, padding_idx, dtype):
        self.name, self.vocab, self.dim, self.init, self.seed = name, vocab, dim, init, seed
        self.entry, self.padding_idx, self.dtype = entry, padding_idx, dtype
        self.pending = []  # this run's lookups' gradients: (unique ids, sums), or fused (every, positions, rows)
        self.local = None  # globaltensor.ps.tables.SparseTable of a run without a client
        self.prefetched = None  # (PS state, its run, ids, rows): the fused pull of this run's lookups
        self.prepulled = None  # (PS state, its run, fed ids, unique, inverse, rows): sync's pull before the run
        self.local_rule = None

    def spec(self):
        from ...ps.spec import SparseSpec
        return SparseSpec(name=self.name, dim=self.dim, init=self.init, seed=self.seed, entry=self.entry,
                          padding_idx=self.padding_idx, dtype=self.dtype)

    def local_table(self, rule):
        """The one-process table (same rows as the servers': seeded by (seed, name, id)); made at
        the first run, with the rule of the program's optimizer."""
        if self.local is None or self.local_rule != rule:
            from ...ps.tables import SparseTable
            fresh = SparseTable(self.spec(), rule)
            if self.local is not None:  # the rule changed (minimize after a forward run): the rows stay
                fresh.load_state(self.local.state())
            self.local, self.local_rule = fresh, rule
        return self.local

    def take_grads(self):
        """The run's (unique ids, summed gradients) over every lookup of the table; cleared."""
        found, self.pending = self.pending, []
        return summed(found, self.dim, self.dtype)


class SparseLookup:
    """The lookup's run-time call: ids -> (rows,): the batch's unique ids pulled once (from the
    program's client when attached, else the local table), scattered back to the ids' order."""

    def __init__(self, program, table, is_test):
        self.program, self.table, self.is_test = program, table, is_test
        self.last = None  # (unique ids, inverse, None, None) of the last run (fused: ids, None, positions, every)

    def __call__(self, ids, *others):
        """others: the ids of the table's later lookups in this run (fuse_lookups gave the first
        lookup theirs): attached, one pull serves them all."""
        t = self.table
        flat = self._checked(ids)
        state = self.program.ps[0]
        if state is not None and not self.is_test:
            fused = self._fused_rows(state, ids, flat, others)
            if fused is not None:  # one unique over every lookup of the run: no sort of its own
                rows, every, at = fused
                if t.padding_idx is not None:
                    rows[flat == t.padding_idx] = 0
                self.last = (flat, None, at, every)
                return (rows.reshape(tuple(np.shape(ids)) + (t.dim,)),)
        uniq, inv = np.unique(flat, return_inverse=True)
        if state is not None and not self.is_test:
            rows = self._remote_rows(state, uniq)
        elif state is not None:
            rows = np.asarray(state.client.pull_sparse(t.name, uniq, is_test=True))
        else:
            rows = t.local_table(local_rule(self.program)).pull(uniq, is_test=self.is_test)
        rows = np.array(rows, dtype=np.dtype(t.dtype), copy=True)
        if t.padding_idx is not None:
            rows[uniq == t.padding_idx] = 0
        self.last = (uniq, inv, None, None)
        return (rows[inv].reshape(tuple(np.shape(ids)) + (t.dim,)),)

    def _checked(self, ids):
        t = self.table
        flat = np.asarray(ids).reshape(-1).astype(np.int64, copy=False)
        if flat.size and (flat.min() < 0 or flat.max() >= t.vocab):
            bad = flat[(flat < 0) | (flat >= t.vocab)][:5]
            raise ValueError(f"sparse_embedding {t.name!r}: ids {bad.tolist()} outside [0, {t.vocab}) (size[0] of "
                             f"the table)")
        return flat

    def _fused_rows(self, state, ids, flat, others):
        """(rows of flat, fresh, in its order; the run's unique ids; flat's positions in them) from the run's fused
        pull, or None where this lookup has no part in one. With others: np.unique of every lookup's ids, one pull,
        each lookup's positions kept by its ids."""
        t = self.table
        if others:
            parts = [flat] + [self._checked(o) for o in others]
            fed = np.concatenate(parts)
            pre = self._prepulled(state, 2, fed)
            if pre is not None:
                every, inv, got = pre[3], pre[4], np.asarray(pre[5], dtype=np.dtype(t.dtype))
            else:
                every, inv = np.unique(fed, return_inverse=True)
                got = np.asarray(self._pull(state, every), dtype=np.dtype(t.dtype))
            pieces = np.split(inv, np.cumsum([len(p) for p in parts])[:-1])
            t.prefetched = (state, state.runs, every, got, {id(o): (o, at) for o, at in zip(others, pieces[1:])})
            return got[pieces[0]], every, pieces[0]
        found = t.prefetched
        if found is not None and found[0] is state and found[1] == state.runs and len(found) > 4:
            mine = found[4].get(id(ids))
            if mine is not None and mine[0] is ids:
                return found[3][mine[1]], found[2], mine[1]
        return None

    def _prepulled(self, state, at, ids):
        """Sync's pull before this run (PSState.before_run) where its ids (at 2: as fed, 3: unique) are ids; once."""
        pre, self.table.prepulled = self.table.prepulled, None
        ok = pre is not None and pre[0] is state and pre[1] == state.runs and np.array_equal(pre[at], ids)
        return pre if ok else None

    def _remote_rows(self, state, uniq):
        """The rows of uniq from the run's fused pull where it holds them all (GEO: rows held locally), else
        pulled now."""
        pre = self._prepulled(state, 3, uniq)
        if pre is not None:
            return pre[5]
        found = self.table.prefetched
        if found is not None and found[0] is state and found[1] == state.runs and len(found[2]):
            every, got = found[2], found[3]
            at = np.minimum(np.searchsorted(every, uniq), len(every) - 1)
            if (every[at] == uniq).all():
                return got[at]
        return self._pull(state, uniq)

    def _pull(self, state, ids):
        name = self.table.name
        if state.mode == "geo":
            return state.geo_rows(name, ids, lambda fresh: state.client.pull_sparse(name, fresh))
        return np.asarray(state.client.pull_sparse(name, ids))


def local_rule(program):
    """The rule a one-process run applies to its sparse rows: the program's optimizer's (sgd with
    lr 0 before any minimize: a forward-only program creates rows, never moves them)."""
    from .ps import rule_of
    if program.minimized:
        return rule_of(program.minimized[-1][1])
    from ...ps.spec import Rule
    return Rule("sgd", 0.0)


def _init_of(param_attr):
    """sparse_embedding's rows: param_attr's initializer (default uniform +-0.05, the servers' default)."""
    found = getattr(param_attr, "initializer", None)
    return ("uniform", -0.05, 0.05) if found is None else init_spec(found, None, "sparse_embedding")


def _check(input, size, entry, table_class, dtype):
    if not isinstance(input, Variable):
        raise TypeError(f"sparse_embedding: input must be a Variable of a static program (int64 ids), got "
                        f"{type(input).__name__}")
    if input.dtype.name != "int64":
        raise TypeError(f"sparse_embedding: input must be int64 ids, got {input.dtype.name}")
    if len(size) != 2 or int(size[0]) <= 0 or int(size[1]) <= 0:
        raise ValueError(f"sparse_embedding: size is [vocabulary, dim] with both > 0, got {list(size)}")
    if table_class not in _TABLE_CLASSES:
        raise ValueError(f"sparse_embedding: table_class must be in {list(_TABLE_CLASSES)}, got {table_class!r}")
    if entry is not None and type(entry).__name__ not in _ENTRIES:
        raise ValueError(f"sparse_embedding: entry must be one of paddle.distributed.{', '.join(_ENTRIES)}, got "
                         f"{type(entry).__name__}")
    if str(dtype) not in ("float32", "float64"):
        raise TypeError(f"sparse_embedding: dtype must be float32 or float64, got {dtype}")


def record_sparse_embedding(program, input, size, padding_idx, is_test, entry, table_class, param_attr, dtype, slot):
    """Records Paddle's lookup_table (is_distributed) of table param_attr.name (or
    sparse_embedding_k.w_0; tables of one name are one table) into program; returns its output."""
    from ..toplevel import ParamAttr
    _check(input, size, entry, table_class, dtype)
    vocab, dim = int(size[0]), int(size[1])
    attr = ParamAttr._to_attr(param_attr)
    name = getattr(attr, "name", None) or f"sparse_embedding_{next(_names)}.w_0"
    pad = -1 if padding_idx is None else padding_idx if padding_idx >= 0 else vocab + padding_idx
    tables = program.sparse_tables
    table = tables.get(name)
    if table is None:
        table = tables[name] = SparseTableState(name, vocab, dim, _init_of(attr), program.random_seed,
                                                entry.spec() if entry is not None else ("none",),
                                                None if pad < 0 else pad, str(dtype))
    elif (table.vocab, table.dim) != (vocab, dim):
        raise ValueError(f"sparse_embedding: table {name!r} is [{table.vocab}, {table.dim}]; this call gives "
                         f"size {[vocab, dim]}")
    lookup = SparseLookup(program, table, is_test)
    ids_reg = program.reg_of(input, "sparse_embedding")
    shape = program.regs[ids_reg].local_shape + (dim,)
    with program.hint("lookup_table"):
        out = Variable(meta_array(shape, dtype), f"lookup_table_{next(_names)}.tmp_0", program)
        attrs = {"padding_idx": pad, "is_sparse": True, "is_distributed": True, "remote_prefetch": True,
                 "is_test": is_test, "entry": entry._to_attr() if entry is not None else "none",
                 "table_class": table_class, "slot": 0 if slot is None else slot, "table": name}
        program.emit_op("sparse_embedding", lookup, [ids_reg], [out], attrs)
    if not is_test:
        out.requires_grad = True  # a leaf: append_backward takes its gradient (sparse_grads)
        program.sparse_lookups.append((out, lookup))
    return out


def sparse_grads(program):
    """append_backward's part for the sparse lookups: [(gradient register, its sink)]."""
    found = []
    for out, lookup in program.sparse_lookups:
        g, out.grad = out.grad, None
        if g is not None:
            r = program.reg_of(g, "append_backward")
            program.names[r] = f"{out.name}@GRAD"
            found.append((r, SparseGradSink(lookup)))
    return found


class SparseCandidate:
    """An embedding(is_sparse=True) lookup of a program: its instruction (ids, table) -> rows, its
    table parameter and what a PS job needs to make the table a sparse table."""

    def __init__(self, instr, param, initializer, padding_idx, is_distributed):
        self.instr, self.param, self.initializer = instr, param, initializer
        self.padding_idx, self.is_distributed = padding_idx, is_distributed


def note_sparse_candidate(program, recorded, param, attr, padding_idx, is_distributed):
    """static.nn.embedding(is_sparse=True): remember its lookup among the recorded instructions."""
    from ..nn import initializer as init
    found = [ins for ins in recorded if ins.kind == "op" and ins.name == "embedding"]
    if not found:
        return  # nothing recorded (ids that are no variable of the program): nothing to make remote
    initializer = getattr(attr, "initializer", None) or init.global_initializer(False) or init.XavierUniform()
    program.sparse_candidates.append(SparseCandidate(found[0], param, initializer, padding_idx, is_distributed))


def to_sparse_tables(program, startup):
    """Paddle's PS passes on program (fleet's minimize in a PS job, before the backward): each
    embedding(is_sparse=True) / (is_distributed=True) table becomes a sparse table of the job (one
    per parameter name, rows seeded from the parameter's initializer); its lookups pull rows like
    sparse_embedding's, and the dense parameter leaves the program and startup (its memory freed).
    Returns the names of the tables made."""
    if not program.sparse_candidates:
        return []
    if program.backward_at is not None:
        raise RuntimeError("parameter server: embedding(is_sparse=True) tables are made sparse tables before the "
                           "backward; call fleet.distributed_optimizer(...).minimize(loss) instead of minimizing "
                           "first")
    params = {id(c.param): c.param for c in program.sparse_candidates}
    _check_only_lookups(program, params)
    for c in program.sparse_candidates:
        _to_lookup(program, c, _table_for(program, c))
    for p in params.values():
        _drop_parameter(program, startup, p)
    program.sparse_candidates = []
    program._runs.clear()
    return sorted(p.name for p in params.values())


def _check_only_lookups(program, params):
    regs = {program.param_regs.get(k): p for k, p in params.items()}
    lookups = {id(c.instr) for c in program.sparse_candidates}
    for ins in program.instrs:
        used = [regs[r] for r in ins.ins if r in regs]
        if used and id(ins) not in lookups:
            raise ValueError(f"parameter server: {used[0].name!r} is a sparse table (embedding(is_sparse=True)) but "
                             f"the op {ins.name!r} also reads it: a sparse table's rows are read by lookups only")


def _table_for(program, c):
    p = c.param
    vocab, dim = (int(n) for n in p.shape)
    pad = c.padding_idx
    pad = None if pad is None else pad if pad >= 0 else vocab + pad
    table = program.sparse_tables.get(p.name)
    if table is None:
        init = init_spec(c.initializer, (vocab, dim), f"embedding {p.name!r} (is_sparse=True)")
        table = program.sparse_tables[p.name] = SparseTableState(p.name, vocab, dim, init, program.random_seed,
                                                                 ("none",), pad, p.dtype.name)
    elif (table.vocab, table.dim) != (vocab, dim):
        raise ValueError(f"parameter server: sparse table {p.name!r} is [{table.vocab}, {table.dim}]; embedding "
                         f"{p.name!r} is {[vocab, dim]}")
    return table


def _to_lookup(program, c, table):
    """The embedding instruction made a sparse lookup; its output a leaf whose gradient is pushed."""
    ins = c.instr
    lookup = SparseLookup(program, table, False)
    ins.name, ins.fn, ins.ins = "sparse_embedding", lookup, ins.ins[:1]
    ins.detail = {"padding_idx": -1 if table.padding_idx is None else table.padding_idx, "is_sparse": True,
                  "is_distributed": True, "table": table.name}
    program.types[id(ins)] = ("distributed_lookup_table", None)
    out = program.vars[program.names[ins.outs[0]]]
    out._node = None
    out.requires_grad = True
    program.sparse_lookups.append((out, lookup))


def _drop_parameter(program, startup, p):
    """p's rows live on the servers now: out of the program's parameters and the startup program."""
    program.parameters = [q for q in program.parameters if q is not p]
    program.param_regs.pop(id(p), None)
    program.param_arrays.pop(id(p._local), None)
    dropped = [ins for ins in startup.instrs if ins.kind == "set" and getattr(ins.fn, "t", None) is p]
    regs = {r for ins in dropped for r in ins.ins}
    startup.instrs = [ins for ins in startup.instrs
                      if not any(ins is d for d in dropped) and not (ins.kind == "const" and set(ins.outs) & regs)]
    for r in regs:  # the initial value the startup program kept (a copy of the table)
        startup.by_array.pop(id(startup.regs[r].array), None)
        startup.regs[r].array = meta_array(startup.regs[r].local_shape, startup.regs[r].dtype)
    startup._runs.clear()
    p._local = meta_array(p._local.shape, p._local.dtype)


def fuse_lookups(program):
    """Paddle's PS pass fuses a table's lookups into one pull: the first training lookup of each
    table takes the ids of the table's later ones as extra inputs (where they are computed before
    it, fed ids say), so an attached run pulls the table once. Returns the number of lookups fused."""
    first_at = {id(ins.fn): i for i, ins in enumerate(program.instrs) if isinstance(ins.fn, SparseLookup)}
    by_table = {}
    for _, lookup in program.sparse_lookups:
        if id(lookup) in first_at and not lookup.is_test:
            by_table.setdefault(lookup.table.name, []).append(lookup)
    fused = 0
    for lookups in by_table.values():
        instrs = sorted((program.instrs[first_at[id(lk)]] for lk in lookups), key=lambda ins: first_at[id(ins.fn)])
        head, rest = instrs[0], instrs[1:]
        ready = set(program.feeds.values())
        for ins in program.instrs[:first_at[id(head.fn)]]:
            ready.update(ins.outs)
        extra = [ins.ins[0] for ins in rest if ins.ins[0] in ready]
        if extra and len(head.ins) == 1:
            head.ins = head.ins + extra
            fused += len(extra)
    program._runs.clear()
    return fused


def ps_passes(program, startup):
    """fleet's minimize in a PS job, before the backward: to_sparse_tables, then fuse_lookups."""
    made = to_sparse_tables(program, startup)
    fuse_lookups(program)
    return made
