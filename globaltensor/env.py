"""Where this process stands in the job: rank, world size, local rank, number of nodes.

A leaf: it reads the launcher's environment variables (or mpirun's, srun's) and imports nothing from the project.
`gt.env.barrier()` is `globaltensor.distributed.job_barrier`, put here by the package."""
import functools
import os


def _int(name, default):
    value = os.environ.get(name)
    return default if value in (None, "") else int(value)


# (rank, size, local rank, local size) as the MPI launchers (mpirun, mpiexec, srun) name them; first found wins
_MPI_ENVS = [
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK", "PMIX_LOCAL_SIZE"),
    ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
]


def from_mpirun():
    """{"rank", "world_size", "local_rank", "local_world_size"} when an MPI launcher (not ours) started
    this process as one of several ranks, else None. Our launcher's RANK wins over all of them."""
    if os.environ.get("RANK") not in (None, ""):
        return None
    return _mpi_launcher_env()


@functools.lru_cache(maxsize=1)
def _mpi_launcher_env():
    """from_mpirun's answer, read once: an MPI launcher's variables do not change in a process."""
    for rank, size, local, local_size in _MPI_ENVS:
        if os.environ.get(rank) and os.environ.get(size) and int(os.environ[size]) > 1:
            found = {"rank": int(os.environ[rank]), "world_size": int(os.environ[size]),
                     "local_rank": _int(local, 0)}
            found["local_world_size"] = _int(local_size, found["world_size"]) if local_size != "SLURM_NTASKS_PER_NODE" \
                else int((os.environ.get(local_size) or str(found["world_size"])).split("(")[0])
            return found
    return None


def _job(name, default):
    """The launcher's variable, else mpirun's, else the plain run's default."""
    value = os.environ.get(name)
    if value not in (None, ""):
        return int(value)
    mpi = _mpi_launcher_env()
    return default if mpi is None else mpi[name.lower()]


def get_rank():
    """This process's rank in [0, world size); 0 in a plain `python script.py` run."""
    return _job("RANK", 0)


def get_world_size():
    """The number of ranks in the job; 1 in a plain run."""
    return _job("WORLD_SIZE", 1)


def get_local_rank():
    """This process's rank among the ranks of its node."""
    return _job("LOCAL_RANK", 0)


def get_local_world_size():
    """The number of ranks on this node."""
    return _job("LOCAL_WORLD_SIZE", get_world_size())


def get_node_size():
    """The number of nodes (machines) in the job."""
    return _int("GLOBALTENSOR_NNODES", max(1, get_world_size() // max(1, get_local_world_size())))
