"""fluid's data-parallel executors: ParallelExecutor and DistributeTranspiler (nccl2 here, pserver in transpiler.py)."""
import numpy as np

from ...env import get_rank, get_world_size
from ..static import Executor, default_main_program, default_startup_program

class DistributeTranspilerConfig:
    """mode: "pserver" (the default, as Paddle's) or "nccl2" (collective: data parallel over trainers)."""

    def __init__(self):
        self.mode = "pserver"
        self.slice_var_up = True
        self.split_method = None
        self.min_block_size = 8192
        self.sync_mode = True
        self.print_log = False
        self.wait_port = True
        self.nccl_comm_num = 1
        self.use_hierarchical_allreduce = False
        self.runtime_split_send_recv = False  # the pserver mode's send/recv always split by block here
        self.geo_sgd_mode = False  # pserver mode: GEO (trainers train locally, push deltas every
        self.geo_sgd_need_push_nums = 100  # ... this many steps)
        self.completely_not_async = False
        self.half_async = False


class DistributeTranspiler:
    """transpile(trainer_id, trainers="ep1,ep2", current_endpoint=ep) in nccl2 mode: trainer i is
    rank i of the job (python -m globaltensor.distributed.launch --nproc_per_node N), the
    program's gradients are averaged over the trainers before each update. pserver mode (the
    default): transpile(trainer_id, pservers="ip:port,...", trainers=N, sync_mode) makes the
    trainer program (send / recv against the pservers) and each endpoint's pserver program
    (listen_and_serv, one optimize block per parameter block): fluid/transpiler.py."""

    def __init__(self, config=None):
        self.config = config if config is not None else DistributeTranspilerConfig()
        self._job = None  # pserver mode: (JobSpec, its dense blocks)

    def transpile(self, trainer_id, program=None, pservers="127.0.0.1:6174", trainers=1, sync_mode=True,
                  startup_program=None, current_endpoint="127.0.0.1:6174"):
        self.program = program if program is not None else default_main_program()
        self.startup_program = startup_program if startup_program is not None else default_startup_program()
        self.trainer_id = trainer_id
        if self.config.mode == "pserver":
            from .transpiler import transpile_pserver
            self._job = transpile_pserver(self.config, trainer_id, self.program, pservers, trainers, sync_mode)
            return
        if self.config.mode != "nccl2":
            raise ValueError(f"DistributeTranspilerConfig.mode: \"pserver\" or \"nccl2\", got {self.config.mode!r}")
        endpoints = [e.strip() for e in trainers.split(",")] if isinstance(trainers, str) else None
        if endpoints is None:
            raise ValueError("DistributeTranspiler nccl2: trainers is the comma-separated list of the trainers' "
                             "endpoints (\"ip:port,ip:port\")")
        _check_trainers(len(endpoints), trainer_id, "DistributeTranspiler.transpile")
        if current_endpoint not in endpoints or endpoints.index(current_endpoint) != trainer_id:
            raise ValueError(f"DistributeTranspiler.transpile: current_endpoint {current_endpoint!r} is not trainer "
                             f"{trainer_id}'s endpoint in trainers {endpoints}")
        self.endpoints = endpoints
        _data_parallel(self.program)
        self.program._nccl2 = endpoints

    def _pserver_job(self, what):
        if self._job is None:
            raise RuntimeError(f"DistributeTranspiler.{what}: call transpile(...) in pserver mode first")
        return self._job

    def get_trainer_program(self, wait_port=True):
        """The program, its update now the pservers' (printed as send / recv); Executor.run of it
        connects at its first run (waiting up to the job's timeout for every pserver) and pulls
        the pservers' parameters, then each run pushes the gradients and pulls the new values.
        Executor.close() tells the pservers this trainer is done."""
        if self._job is None:
            return self.program
        from ..static import ps
        from .transpiler import make_client, trainer_ops
        job, blocks = self._job
        if self.program.ps[0] is None:
            ops = None if job.mode == "geo" else trainer_ops(job, blocks, self.trainer_id)
            ps.attach(self.program, make_client(job, self.trainer_id), ops=ops, connect=True)
        return self.program

    def get_startup_program(self, endpoint=None, pserver_program=None, startup_program=None):
        """The trainers' startup program (endpoint None), or a pserver's: it runs the same seeded
        initializers and hands the values to the pserver program."""
        if endpoint is None or self._job is None:
            return self.startup_program
        from .transpiler import PServerStartup
        return PServerStartup(pserver_program or self.get_pserver_program(endpoint), startup_program or
                              self.startup_program)

    def get_pserver_program(self, endpoint):
        """The program of pserver `endpoint`: listen_and_serv and an optimize block per parameter
        block it owns; Executor.run of it serves until every trainer has stopped."""
        from .transpiler import PServerProgram
        job, blocks = self._pserver_job("get_pserver_program")
        if endpoint not in job.servers:
            raise ValueError(f"DistributeTranspiler.get_pserver_program: endpoint {endpoint!r} is not one of the "
                             f"pservers {list(job.servers)}")
        return PServerProgram(job, job.servers.index(endpoint), blocks, self.program)

    def get_pserver_programs(self, endpoint):
        """(pserver program, its startup program) of endpoint."""
        main = self.get_pserver_program(endpoint)
        return main, self.get_startup_program(endpoint, main)


def _check_trainers(num_trainers, trainer_id, who):
    """The trainers are the job's ranks: their number is the world size and trainer_id this rank."""
    world, rank = get_world_size(), get_rank()
    if num_trainers != world:
        raise ValueError(f"{who}: {num_trainers} trainers, but the job has {world} ranks (run it with "
                         f"python -m globaltensor.distributed.launch --nproc_per_node {num_trainers})")
    if trainer_id != rank:
        raise ValueError(f"{who}: trainer_id {trainer_id} on rank {rank}: trainer i is rank i of the job (read it "
                         f"from PADDLE_TRAINER_ID or paddle.distributed.get_rank())")


def _data_parallel(program):
    """The program's updates average the gradients over the ranks first (once joined)."""
    if get_world_size() > 1:
        from ..distributed import init_parallel_env
        init_parallel_env()
    for ins in program.instrs:
        if ins.kind == "step" and ins.detail and not ins.detail.get("average"):
            ins.detail["average"] = True
            ins.fn.average = True
    program._runs.clear()


def _broadcast_parameters(program):
    """Every rank starts from rank 0's parameters (as ParallelExecutor broadcasts them)."""
    if get_world_size() == 1:
        return
    from ...distributed.collectives import broadcast
    for p in program.parameters:
        piece = np.ascontiguousarray(p._local)
        p._local = broadcast(piece if piece.flags.writeable else piece.copy(), src=0)


class ParallelExecutor:
    """ParallelExecutor(use_cuda, loss_name, main_program, num_trainers, trainer_id): runs the main
    program on this rank's feed; with num_trainers > 1 (after an nccl2 transpile, or alone) the
    parameters start from trainer 0's and the gradients are averaged over the trainers."""

    def __init__(self, use_cuda, loss_name=None, main_program=None, share_vars_from=None, exec_strategy=None,
                 build_strategy=None, num_trainers=1, trainer_id=0, scope=None):
        if use_cuda:
            from ...backends.cuda import is_available
            if not is_available():
                raise RuntimeError("ParallelExecutor(use_cuda=True): this machine has no CUDA GPU (or globaltensor "
                                   "was built without CUDA); pass use_cuda=False to train on the CPU")
        self.program = main_program if main_program is not None else default_main_program()
        self.loss_name = loss_name
        if num_trainers > 1:
            _check_trainers(num_trainers, trainer_id, "ParallelExecutor")
            _data_parallel(self.program)
            _broadcast_parameters(self.program)
        from ..framework import CUDAPlace, CPUPlace
        self._executor = Executor(CUDAPlace(0) if use_cuda else CPUPlace())

    def run(self, fetch_list, feed=None, feed_dict=None, return_numpy=True):
        feed = feed if feed is not None else feed_dict
        if isinstance(feed, (list, tuple)):  # one dict per device: a rank is one device here
            if len(feed) != 1:
                raise ValueError(f"ParallelExecutor.run: {len(feed)} feeds for one device (a rank runs one)")
            feed = feed[0]
        return self._executor.run(self.program, feed=feed, fetch_list=fetch_list, return_numpy=return_numpy)

    def drop_local_exe_scopes(self):
        pass

    @property
    def device_count(self):
        return 1
