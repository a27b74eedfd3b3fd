"""Where this process stands in the job: rank, world size, local rank, number of nodes.

A leaf: it reads the launcher's environment variables and imports nothing from the project.
`gt.env.barrier()` is `globaltensor.distributed.job_barrier`, put here by the package."""
import os


def _int(name, default):
    value = os.environ.get(name)
    return default if value in (None, "") else int(value)


def get_rank():
    """This process's rank in [0, world size); 0 in a plain `python script.py` run."""
    return _int("RANK", 0)


def get_world_size():
    """The number of ranks in the job; 1 in a plain run."""
    return _int("WORLD_SIZE", 1)


def get_local_rank():
    """This process's rank among the ranks of its node."""
    return _int("LOCAL_RANK", 0)


def get_local_world_size():
    """The number of ranks on this node."""
    return _int("LOCAL_WORLD_SIZE", get_world_size())


def get_node_size():
    """The number of nodes (machines) in the job."""
    return _int("GLOBALTENSOR_NNODES", max(1, get_world_size() // max(1, get_local_world_size())))
