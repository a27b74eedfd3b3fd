"""Fleet in a parameter-server job: the role queries, the job's spec from minimize, servers' and trainers' lifecycle."""
import os

_ps = {"role": None, "strategy": None, "program": None, "optimizer": None, "job": None, "server": None,
       "client": None, "initial": None}


def start(role_maker, strategy):
    """fleet.init in PS mode: remember the role (nothing is started before init_server / init_worker)."""
    _ps.update(role=role_maker, strategy=strategy, program=None, optimizer=None, job=None, server=None,
               client=None, initial=None)


def active():
    return _ps["role"] is not None


def role():
    if _ps["role"] is None:
        raise RuntimeError("fleet: call fleet.init(role_maker) before using the parameter-server functions")
    return _ps["role"]


def _require(server, what):
    r = role()
    if server and not r._is_server():
        raise RuntimeError(f"fleet.{what}() is for servers; this process is trainer {r._worker_index()} "
                           f"(guard it with `if fleet.is_server():`)")
    if not server and r._is_server():
        raise RuntimeError(f"fleet.{what}() is for trainers; this process is server {r._server_index()} "
                           f"(guard it with `if fleet.is_worker():`)")


def _job(what):
    if _ps["job"] is None:
        raise RuntimeError(f"fleet.{what}(): no parameter-server program yet; call "
                           f"fleet.distributed_optimizer(optimizer, strategy).minimize(loss) first (static mode)")
    return _ps["job"]


def _secret():
    text = os.environ.get("GLOBALTENSOR_SECRET", "")
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise ValueError("GLOBALTENSOR_SECRET must be a hex string (the launcher sets it)") from None


class PSOptimizer:
    """distributed_optimizer(opt, strategy) in a PS job: minimize records the program's backward and
    update as opt does, then makes the job's JobSpec (the servers run the update)."""

    def __init__(self, optimizer, strategy):
        self.inner_opt, self.user_defined_strategy = optimizer, strategy

    def __getattr__(self, name):
        return getattr(self.__dict__["inner_opt"], name)

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
        """Paddle's PS passes first (embedding(is_sparse=True) tables become sparse tables of the
        job), then opt's minimize records the backward and update, then the job's JobSpec."""
        from ... import static
        from ...static import ps
        program = getattr(loss, "program", None) or static.default_main_program()
        mode, k_steps = self.user_defined_strategy.ps_mode()
        r = role()
        static.sparse.ps_passes(program, startup_program or program._startup_of or static.default_startup_program())
        result = self.inner_opt.minimize(loss, startup_program, parameter_list, no_grad_set)
        job = ps.job_spec(program, self.inner_opt, mode, k_steps=k_steps, servers=tuple(r._get_pserver_endpoints()),
                          trainers=r._worker_num(), secret=_secret())
        _ps.update(program=program, optimizer=self.inner_opt, job=job)
        return result


def init_server(dirname=None, var_names=None, **kwargs):
    """Build this server's blocks and rows: from the program's values after the startup program,
    or from a checkpoint in dirname (saved with any number of servers)."""
    _require(True, "init_server")
    if var_names is not None:
        raise NotImplementedError("fleet.init_server(var_names=...): a server loads every table of the checkpoint")
    job = _job("init_server")
    from ....ps import Server
    from ...static import ps
    dirname = dirname if dirname is not None else kwargs.pop("model_dir", None)
    _ps["server"] = Server(job, role()._server_index(), initial=ps.initial_values(_ps["program"], copy=False),
                          model_dir=dirname)


def run_server():
    """Serve until every trainer has called stop_worker (raises PSError naming a trainer that died)."""
    _require(True, "run_server")
    if _ps["server"] is None:
        raise RuntimeError("fleet.run_server(): call fleet.init_server() first")
    server, _ps["server"] = _ps["server"], None
    try:
        server.serve()
    finally:
        server.close()


def init_worker(scopes=None):
    """Connect to every server (naming those that do not answer) and run the program against them."""
    _require(False, "init_worker")
    job = _job("init_worker")
    from ....ps import Client
    from ...static import ps
    if _ps["client"] is not None:
        raise RuntimeError("fleet.init_worker(): this trainer is already connected")
    client = Client(job, role()._worker_index()).connect()
    try:
        ps.attach(_ps["program"], client)
    except BaseException:
        client.close()
        raise
    _ps["client"] = client


def _client(what):
    if _ps["client"] is None:
        raise RuntimeError(f"fleet.{what}(): call fleet.init_worker() first")
    return _ps["client"]


def stop_worker():
    """This trainer is done: (async / GEO) wait for the others and take the servers' final dense values;
    then tell the servers, which return from run_server once every trainer has stopped."""
    _require(False, "stop_worker")
    client = _client("stop_worker")
    from ...static import ps
    try:
        ps.detach(_ps["program"])
        if client.job.mode != "sync":  # sync: detach took the last step's values (they waited for every push)
            client.barrier()  # every trainer's last push is in: the values below are the job's final ones
            _assign(client.pull_dense([d.name for d in client.job.dense]) if client.job.dense else {})
        client.stop()
    finally:
        _ps["client"] = None
        client.close()


def _assign(values):
    """The program's dense parameters take the servers' values."""
    import numpy as np
    from ...static import ps
    params = {getattr(p, "name", None): p for p in ps.dense_parameters(_ps["program"])}
    for name, value in values.items():
        p = params[name]
        p._local = np.array(value, dtype=p._local.dtype, copy=True).reshape(p._local.shape)


def barrier_worker():
    """Wait until every trainer that has not stopped reaches this barrier."""
    _require(False, "barrier_worker")
    _client("barrier_worker").barrier()


def save_persistables(executor=None, dirname=None, main_program=None, mode=0):
    """Trainer 0 asks every server to save its blocks and rows under dirname (with a manifest each);
    the other trainers return at once (as Paddle, one trainer saves for the job)."""
    _require(False, "save_persistables")
    if dirname is None:
        raise ValueError("fleet.save_persistables(executor, dirname): dirname is required")
    if role()._worker_index() != 0:
        return
    _client("save_persistables").save(os.path.abspath(os.fspath(dirname)))
