"""Where this process stands in the job: rank, world size, local rank, number of nodes."""
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


def barrier():
    """Wait until every rank arrives (shared memory on one node, the store across nodes)."""
    from .distributed.world import world
    from .distributed.group import world_group
    w = world()
    w.join()
    if len(set(w.host_keys)) > 1:
        w.store.barrier(f"env/barrier/{_next_barrier()}", w.rank, w.world_size)
    else:
        world_group().native("barrier").barrier()


_barrier_count = 0


def _next_barrier():
    global _barrier_count
    _barrier_count += 1
    return _barrier_count
