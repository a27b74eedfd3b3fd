"""fluid.transpiler: DistributeTranspiler's pserver mode: trainer programs (send, recv) and pserver programs.

transpile() builds the job (globaltensor.ps.JobSpec: the program's dense parameters sliced into
blocks by Paddle's rule, globaltensor.ps.partition; its sparse tables; the rule from its
optimizer). The trainer program is the program itself, attached to a globaltensor.ps Client
(static/ps.py): it prints its update as Paddle's split_byref / send / send_barrier / recv /
fetch_barrier / concat, and Executor.run of it pushes and pulls. A pserver program holds one
listen_and_serv op and one optimize block per parameter block its endpoint owns; Executor.run of
it serves (a globaltensor.ps Server) until every trainer has stopped (Executor.close()).
"""
import os

from ..static.block import Operator

__all__ = ["RoundRobin", "HashName", "PServerProgram", "PServerStartup", "transpile_pserver", "trainer_ops"]

DISTRIBUTED_MODE = {"sync": 0, "async": 1, "geo": 3}  # Paddle's DistributedMode values


class RoundRobin:
    """config.split_method: parameter blocks go to the servers in turn (Paddle's default)."""

    name = "RoundRobin"


class HashName:
    """config.split_method: a parameter block goes to the server its name hashes to (a stable hash)."""

    name = "HashName"


def _endpoints(pservers):
    eps = [e.strip() for e in pservers.split(",")] if isinstance(pservers, str) else list(pservers or ())
    bad = [e for e in eps if e.count(":") != 1 or not e.rsplit(":", 1)[1].isdigit()]
    if not eps or bad:
        raise ValueError(f"DistributeTranspiler.transpile: pservers is \"ip:port,ip:port\", got {pservers!r}")
    if len(set(eps)) != len(eps):
        raise ValueError(f"DistributeTranspiler.transpile: pservers lists an endpoint twice: {eps}")
    return eps


def _secret():
    found = os.environ.get("GLOBALTENSOR_SECRET", "")
    try:
        return bytes.fromhex(found)
    except ValueError:
        raise ValueError("GLOBALTENSOR_SECRET must be hex (the launcher's job secret)") from None


def transpile_pserver(config, trainer_id, program, pservers, trainers, sync_mode):
    """The job of a pserver-mode transpile: (JobSpec, its dense blocks)."""
    eps = _endpoints(pservers)
    trainers = len(trainers.split(",")) if isinstance(trainers, str) else trainers
    if not isinstance(trainers, int) or trainers < 1:
        raise ValueError(f"DistributeTranspiler.transpile: trainers must be the number of trainers (>= 1), got "
                         f"{trainers!r}")
    if not isinstance(trainer_id, int) or not 0 <= trainer_id < trainers:
        raise ValueError(f"DistributeTranspiler.transpile: trainer_id {trainer_id!r} is not in [0, {trainers})")
    if not program.minimized:
        raise ValueError("DistributeTranspiler.transpile: the program has no optimizer; call "
                         "optimizer.minimize(loss) before transpile (its update is what the pservers run)")
    from ...ps.partition import job_blocks
    from ..static import ps
    geo = getattr(config, "geo_sgd_mode", False)
    mode = "geo" if geo else "sync" if (sync_mode and config.sync_mode) else "async"
    split = config.split_method or RoundRobin
    job = ps.job_spec(program, program.minimized[-1][1], mode, k_steps=getattr(config, "geo_sgd_need_push_nums", 0)
                      if geo else 0, servers=eps, trainers=trainers, secret=_secret(),
                      min_block_size=int(config.min_block_size), slice_var_up=bool(config.slice_var_up),
                      split_method=getattr(split, "name", split))
    return job, job_blocks(job)


def param_of(block):
    """The parameter a dense block slices (Block.name is Paddle's "w.block0")."""
    tail = f".block{block.index}"
    return block.name[:-len(tail)] if block.name.endswith(tail) else block.name


def _by_param(blocks):
    found = {}
    for b in blocks:
        found.setdefault(param_of(b), []).append(b)
    return found


def _names(param, blocks, suffix=""):
    """Paddle's names of a parameter's (or gradient's) blocks: the name itself when it is one block."""
    if len(blocks) == 1:
        return [param + suffix]
    return [f"{param}.block{b.index}{suffix}" for b in blocks]


def trainer_ops(job, blocks, trainer_id):
    """The ops a trainer program's update prints as (Paddle's sync / async trainer program)."""
    eps, sync, ops = list(job.servers), job.mode == "sync", []
    per = _by_param(blocks)
    tail = f".trainer_{trainer_id}" if sync and job.trainers > 1 else ""
    for d in job.dense:
        bl = per[d.name]
        grads = _names(f"{d.name}@GRAD", bl, tail)
        if len(bl) > 1:
            ops.append(Operator("split_byref", [f"{d.name}@GRAD"], grads,
                                {"sections": [b.row_end - b.row_start for b in bl], "axis": 0}))
        ops.append(Operator("send", grads, [], {"epmap": [eps[b.server] for b in bl]}))
    for s in job.sparse:
        ops.append(Operator("send", [f"{s.name}@GRAD"], [], {"epmap": eps, "is_sparse": True}))
    if sync:
        ops.append(Operator("send_barrier", [], [], {"endpoints": eps, "trainer_id": trainer_id,
                                                    "half_async": False}))
    received = []
    for d in job.dense:
        bl = per[d.name]
        received += _names(d.name, bl)
        ops.append(Operator("recv", [], _names(d.name, bl), {"epmap": [eps[b.server] for b in bl],
                                                           "trainer_id": trainer_id}))
    if sync:
        ops.append(Operator("fetch_barrier", [], received, {"endpoints": eps, "trainer_id": trainer_id}))
    for d in job.dense:
        if len(per[d.name]) > 1:
            ops.append(Operator("concat", _names(d.name, per[d.name]), [d.name], {"axis": 0}))
    return ops


class _BlockView:
    """One block of a pserver program: .idx, .parent_idx, .ops."""

    def __init__(self, idx, parent, ops, program):
        self.idx, self.parent_idx, self.ops, self.program = idx, parent, ops, program

    @property
    def vars(self):
        return self.program.block_vars(self.idx)

    def __repr__(self):
        head = f"{{ // block_idx:{self.idx}  parent_idx:{self.parent_idx}  forward_idx:-1  backward_idx:-1"
        lines = [head] + [f"    var {n} : DENSE_TENSOR.shape({_dims(s)}).dtype(float32)"
                          for n, s in self.vars.items()]
        return "\n".join(lines + [f"    {op!r}" for op in self.ops] + ["}"])

    __str__ = __repr__


def _dims(shape):
    return str(tuple(int(n) for n in shape))[1:-1]


def optimize_blocks(job, blocks, index):
    """Server index's optimize blocks: [(variable, shape, ops)] per dense block it owns, then per
    sparse table; and grad_to_block_id ("grad:block")."""
    found, grad_to_block = [], []
    per = _by_param(blocks)
    for b in (b for b in blocks if b.server == index):
        one = len(per[param_of(b)]) == 1
        param = param_of(b) if one else f"{param_of(b)}.block{b.index}"
        grad = f"{param_of(b)}@GRAD" + ("" if one else f".block{b.index}")
        ops = []
        if job.mode == "sync" and job.trainers > 1:
            ops.append(Operator("sum", [f"{grad}.trainer_{i}" for i in range(job.trainers)], [grad]))
            ops.append(Operator("scale", [grad], [grad], {"scale": 1.0 / job.trainers}))
        ops.append(Operator(job.rule.kind, [param, grad, "learning_rate_0"], [param], dict(job.rule.params)))
        found.append((param, b.shape, ops))
        grad_to_block.append(f"{grad}:{len(found)}")
    for t in job.sparse:
        ops = [Operator(job.rule.kind, [t.name, f"{t.name}@GRAD", "learning_rate_0"], [t.name],
                        dict(job.rule.params, is_sparse=True))]
        found.append((t.name, (-1, t.dim), ops))
        grad_to_block.append(f"{t.name}@GRAD:{len(found)}")
    return found, grad_to_block


class PServerProgram:
    """get_pserver_program(endpoint): block 0's listen_and_serv op, and an optimize block per
    parameter block (and per sparse table) this endpoint serves. Executor.run(it) serves."""

    def __init__(self, job, index, blocks, origin):
        self.job, self.index, self.origin = job, index, origin
        self.endpoint = job.servers[index]
        self.blocks_owned = [b for b in blocks if b.server == index]
        self.initial = None  # the dense parameters' full values (the pserver startup program's run)
        self._optimize, grad_to_block = optimize_blocks(job, blocks, index)
        attrs = {"endpoint": self.endpoint, "pserver_id": index, "Fanin": job.trainers,
                 "distributed_mode": DISTRIBUTED_MODE[job.mode], "optimize_blocks": list(range(1, len(self._optimize)
                                                                                             + 1)),
                 "grad_to_block_id": grad_to_block, "sparse_grad_to_param": [f"{s.name}@GRAD:{s.name}"
                                                                              for s in job.sparse]}
        self._serve_op = Operator("listen_and_serv", [g.split(":")[0] for g in grad_to_block], [], attrs)

    @property
    def num_blocks(self):
        return 1 + len(self._optimize)

    def block(self, index):
        if index == 0:
            return _BlockView(0, -1, [self._serve_op], self)
        if not 0 < index < self.num_blocks:
            raise IndexError(f"block {index}: this pserver program has blocks 0..{self.num_blocks - 1}")
        return _BlockView(index, 0, self._optimize[index - 1][2], self)

    def global_block(self):
        return self.block(0)

    @property
    def blocks(self):
        return [self.block(i) for i in range(self.num_blocks)]

    def block_vars(self, idx):
        if idx == 0:
            return {name: shape for name, shape, _ in self._optimize}
        name, shape, ops = self._optimize[idx - 1]
        return {n: shape for n in dict.fromkeys(ops[-1].input_arg_names[:2])}

    def run_by(self, executor):
        """Executor.run(this program): the endpoint's Server, from the startup's values, until the trainers stop."""
        from ..static import ps
        initial = self.initial if self.initial is not None else ps.initial_values(self.origin)
        server = make_server(self.job, self.index, initial)
        try:
            server.serve()
        finally:
            close = getattr(server, "close", None)
            if close is not None:
                close()
        return []

    def __str__(self):
        return "\n".join(str(b) for b in self.blocks)

    __repr__ = __str__


class PServerStartup:
    """get_startup_program(endpoint, pserver_program): runs the trainers' startup program (the
    same seeded initializers) and keeps the values for the pserver program's Server."""

    def __init__(self, pserver_program, startup):
        self.pserver_program, self.startup = pserver_program, startup

    def run_by(self, executor):
        from ..static import ps
        executor.run(self.startup)
        self.pserver_program.initial = ps.initial_values(self.pserver_program.origin)
        return []

    def __str__(self):
        kinds = {ins.name: ins.detail["type"] for ins in self.startup.instrs if ins.kind == "set" and ins.detail}
        ops = [Operator(kinds.get(n.split(".block")[0], "uniform_random"), [], [n])
               for n in self.pserver_program.block_vars(0)]
        return "\n".join(["{ // block_idx:0  parent_idx:-1  forward_idx:-1  backward_idx:-1"] +
                         [f"    {op!r}" for op in ops] + ["}"])

    __repr__ = __str__


def make_server(job, index, initial):
    from ...ps.server import Server
    return Server(job, index, initial=initial)


def make_client(job, trainer_id):
    from ...ps.client import Client
    return Client(job, trainer_id)
