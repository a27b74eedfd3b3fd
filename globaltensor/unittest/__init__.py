"""oneflow.unittest: the TestCase and skip_unless_<N>n<D>d decorators OneFlow's tests and users' tests import."""
import os
import unittest as _unittest

from . import env
from .env import device_num, eager_execution_enabled, has_node_list, has_world_size, node_list, node_size, \
    typing_check_enabled, world_size

TestCase = _unittest.TestCase
MLIRTestCase = _unittest.TestCase  # OneFlow's MLIR tests need its compiler; here a plain TestCase

__all__ = ["TestCase", "MLIRTestCase", "env", "skip_unless", "skip_unless_1n1d", "skip_unless_1n2d",
           "skip_unless_1n4d", "skip_unless_2n1d", "skip_unless_2n2d", "skip_unless_2n4d", "num_nodes_required",
           "register_test_cases", "dataset_dir", "device_num", "eager_execution_enabled", "has_node_list",
           "has_world_size", "node_list", "node_size", "typing_check_enabled", "world_size"]


def skip_unless(n, d):
    """A decorator that runs the test only in a job of n nodes with d ranks each, and skips it otherwise."""
    if node_size() == n and device_num() == d:
        return lambda test: test
    return _unittest.skip(f"only runs when node_size is {n} and device_num is {d} "
                          f"(this job: {node_size()} node(s), {device_num()} rank(s) each)")


def skip_unless_1n1d():
    return skip_unless(1, 1)


def skip_unless_1n2d():
    return skip_unless(1, 2)


def skip_unless_1n4d():
    return skip_unless(1, 4)


def skip_unless_2n1d():
    return skip_unless(2, 1)


def skip_unless_2n2d():
    return skip_unless(2, 2)


def skip_unless_2n4d():
    return skip_unless(2, 4)


def num_nodes_required(num_nodes):
    """Mark a test function with the nodes it needs (read by register_test_cases)."""
    def mark(f):
        f.__oneflow_test_case_num_nodes_required__ = num_nodes
        return f
    return mark


def register_test_cases(scope, directory, filter_by_num_nodes, base_class=_unittest.TestCase):
    """For each test*.py in directory, a TestCase class in scope holding its test* functions that the filter keeps."""
    import runpy
    for f in sorted(os.listdir(directory)):
        path = os.path.join(directory, f)
        if not (os.path.isfile(path) and f.startswith("test") and f.endswith(".py")):
            continue
        found = runpy.run_path(path, run_name=f[:-3])
        methods = {name: fn for name, fn in found.items() if name.startswith("test") and callable(fn)
                   and filter_by_num_nodes(getattr(fn, "__oneflow_test_case_num_nodes_required__", 1))}
        scope[f[:-3]] = type(f[:-3], (base_class,), methods)


def dataset_dir(sub_dir=None):
    """ONEFLOW_TEST_DATASET_DIR (default /dataset), joined with sub_dir when given."""
    base = os.getenv("ONEFLOW_TEST_DATASET_DIR") or "/dataset"
    return base if sub_dir is None else os.path.join(base, sub_dir)
