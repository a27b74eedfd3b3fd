"""The MPI engine between hosts: rank numbers from mpirun's environment and one communicator over the job.

mpi4py is imported (and MPI initialised) only when a collective first spans two hosts, or when
mpirun started the job. Two ways in:

* mpirun / mpiexec / srun started every rank: MPI_COMM_WORLD is the job (ranks from
  OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID); rank 0 hosts the rendezvous store and
  tells the others where it is over MPI.
* our launcher started them (`--nnodes > 1`): it runs each rank under `mpiexec -n 1` (so each
  is its own MPI job with a process manager) and the ranks join into one communicator with
  MPI_Comm_accept/connect, rank by rank, through a port name published in the store; the
  communicator is then renumbered so its ranks are the job's global ranks.
"""
import os
import shutil
import socket
import zlib

from .. import env

MODE = os.environ.get("GLOBALTENSOR_INTERHOST", "mpi")  # "mpi" or "off" (a two-host job then raises)
mpirun_env = env.from_mpirun
KINDS = ("all_reduce", "all_gather")  # collectives that run on a communicator of their own (JobComm.sub)  # {"rank", "world_size", ...} when mpirun/srun started this rank, else None


def available():
    """(True, "") when MPI can join hosts here, else (False, why)."""
    if MODE == "off":
        return False, "GLOBALTENSOR_INTERHOST=off"
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False, "mpi4py is not installed (pip install 'globaltensor[mpi]')"
    if shutil.which("mpiexec") is None:
        return False, "no `mpiexec` on PATH (pip install 'globaltensor[mpi]' brings MPICH's)"
    return True, ""


def can_join():
    """(True, "") when this rank can join the job's MPI communicator, else (False, why): MPI is
    installed and a process manager started this process (mpirun's, or our launcher's `mpiexec -n 1`)."""
    ok, why = available()
    if not ok:
        return ok, why
    if mpirun_env() is None and not any(os.environ.get(v) for v in ("PMI_FD", "PMI_PORT", "PMIX_RANK")):
        return False, ("this rank was not started under an MPI process manager (MPICH cannot connect bare "
                       "processes): start the job with `python -m globaltensor.distributed.launch --nnodes N ...` "
                       "on each host (it runs every rank under `mpiexec -n 1`) or with mpirun")
    return True, ""


def rank_prefix():
    """What our launcher puts before each rank's command in a job of several nodes: `mpiexec -n 1`
    (the process manager that lets separately started ranks connect), or [] when MPI is not here."""
    ok, _ = available()
    return [shutil.which("mpiexec"), "-n", "1"] if ok else []


def _mpi():
    import mpi4py
    mpi4py.rc.thread_level = "multiple"  # the gradient buckets' worker thread may call in too
    from mpi4py import MPI
    return MPI


def store_from_mpirun(store_server_class, new_secret):
    """Under mpirun: rank 0 starts the rendezvous store on a free port; every rank returns
    (server or None, address, port, secret bytes), agreed over MPI_COMM_WORLD."""
    comm = _mpi().COMM_WORLD
    names = comm.allgather(socket.gethostname())
    server, where = None, None
    if comm.rank == 0:
        secret = bytes.fromhex(os.environ.get("GLOBALTENSOR_SECRET") or new_secret())
        addr = os.environ.get("MASTER_ADDR") or ("127.0.0.1" if len(set(names)) == 1 else
                                                 socket.gethostbyname(names[0]))
        server = store_server_class("" if addr != "127.0.0.1" else addr, int(os.environ.get("MASTER_PORT") or 0), secret)
        where = (addr, server.port, secret)
    addr, port, secret = comm.bcast(where, root=0)
    return server, addr, port, secret


class JobComm:
    """The job's MPI communicator (comm.rank == global rank) and sub-communicators of groups, by ranks."""

    def __init__(self, world):
        MPI = self.MPI = _mpi()
        if mpirun_env() is not None:
            self.comm = MPI.COMM_WORLD
        else:
            self.comm = _join_by_port(MPI, world.store, world.rank, world.world_size)
        self._subs = {}

    def sub(self, ranks, kind=""):
        """The communicator of `ranks` (global ranks, in this order); collective over them only.

        kind: "" or one of KINDS, a duplicate kept for that collective alone, so that ranks that
        call different collectives never match each other's messages (each waits, then times out).
        All of a group's duplicates are made at once, on its first use, so every member makes
        them in the same order whichever collective it called first."""
        found = self._subs.get(ranks)
        if found is None:
            if list(ranks) == list(range(self.comm.size)):
                base = self.comm
            else:
                group = self.comm.group.Incl(list(ranks))
                tag = zlib.crc32(",".join(map(str, ranks)).encode()) & 0x7FFF
                base = self.comm.Create_group(group, tag)
                group.Free()
            found = self._subs[ranks] = {"": base, **{k: base.Dup() for k in KINDS}}
        return found[kind]


def _join_by_port(MPI, store, rank, world_size):
    """Ranks started apart, each a one-process MPI job, joined in rank order through a port in the store."""
    if rank == 0:
        port = MPI.Open_port()
        store.set("mpi/port", port.encode())
        comm = MPI.COMM_SELF
    else:
        store.get(f"mpi/merged/{rank - 1}", waiting_for=f"rank {rank - 1} to join MPI")
        port = store.get("mpi/port").decode()
        inter = MPI.COMM_SELF.Connect(port, root=0)
        comm = inter.Merge(high=True)
        inter.Free()
    store.set(f"mpi/merged/{rank}", b"1")
    for _ in range(rank + 1, world_size):
        inter = comm.Accept(port, root=0)
        merged = inter.Merge(high=False)
        inter.Free()
        comm = merged
    if rank == 0:
        MPI.Close_port(port)
    return comm.Split(0, rank)
