"""oneflow.unittest.env: what the job a test runs in looks like (nodes, devices per node, world size, modes)."""
import os

from .. import env as _job


def _int_var(name):
    value = os.getenv(name)
    return int(value) if value else None


def eager_execution_enabled():
    """Whether ONEFLOW_TEST_ENABLE_EAGER=1, as OneFlow reads it (eager is globaltensor's only mode)."""
    return os.getenv("ONEFLOW_TEST_ENABLE_EAGER") == "1"


def typing_check_enabled():
    return os.getenv("ONEFLOW_TEST_ENABLE_TYPING_CHECK") == "1"


def has_node_list():
    return bool(os.getenv("ONEFLOW_TEST_NODE_LIST"))


def node_list():
    """The hosts of ONEFLOW_TEST_NODE_LIST (comma separated); it must be set."""
    names = os.getenv("ONEFLOW_TEST_NODE_LIST")
    assert names, "ONEFLOW_TEST_NODE_LIST is not set"
    return names.split(",")


def node_size():
    """Nodes of the job: ONEFLOW_TEST_NODE_NUM, else the node list's length, else the launcher's --nnodes."""
    n = _int_var("ONEFLOW_TEST_NODE_NUM")
    if n:
        return n
    return len(node_list()) if has_node_list() else _job.get_node_size()


def has_world_size():
    return True


def world_size():
    return _job.get_world_size()


get_world_size = world_size


def device_num():
    """Devices (ranks) per node: ONEFLOW_TEST_DEVICE_NUM, else the job's ranks over its nodes.

    OneFlow counts GPUs per node; a rank here is a process, on CPU or on a device, so a job
    started with --nproc_per_node 2 is a 1n2d job."""
    d = _int_var("ONEFLOW_TEST_DEVICE_NUM")
    return d if d else max(1, _job.get_world_size() // max(1, node_size()))
