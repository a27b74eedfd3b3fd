"""A launcher process loads none of the tensor runtime, and every name still works there once asked for."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from globaltensor.distributed.launcher_mode import main_module

LAUNCHERS = ["globaltensor.distributed.launch", "globaltensor.paddle.distributed.launch"]
RUNTIME = ("numpy", "globaltensor._native", "globaltensor.ops", "globaltensor.tensor", "globaltensor.paddle._surface",
           "globaltensor._surface", "globaltensor.distributed._surface", "cloudpickle", "zmq")


def _run(args, timeout=120):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_the_launcher_process_imports_the_standard_library_only(launcher):
    out = _run(["-X", "importtime", "-m", launcher, "--help"])
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = {line.rsplit("|", 1)[1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "globaltensor.distributed._procs" in loaded  # the launcher ran (as __main__)
    assert not [m for m in RUNTIME if m in loaded], sorted(m for m in RUNTIME if m in loaded)


_SURFACE = """
import json, sys, types
{prelude}
import globaltensor as gt, globaltensor.paddle as paddle, globaltensor.distributed as d
import globaltensor.paddle.distributed as pd
before = sorted(m for m in {runtime!r} if m in sys.modules)
x = gt.zeros(2, 3) + 1  # the first name asked for loads every deferred package
names = {{}}
for m in (gt, paddle, d, pd):
    names[m.__name__] = sorted(k for k, v in vars(m).items() if not k.startswith("_") and
                               not isinstance(v, types.ModuleType))
star = {{}}
exec("from globaltensor import *", star)
print(json.dumps({{"before": before, "sum": float(x.sum()), "names": names, "star": sorted(star),
                  "module": paddle.to_tensor.__module__, "reduce_op": pd.ReduceOp.__module__,
                  "dp": d.DataParallel.__name__, "t": paddle.to_tensor([1.0, 2.0]).numpy().tolist()}}))
"""


def _surface(prelude):
    out = _run(["-c", textwrap.dedent(_SURFACE.format(prelude=prelude, runtime=RUNTIME))])
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_launcher_process_gets_every_name_a_plain_import_gets():
    plain = _surface("")
    deferred = _surface("sys.orig_argv[:] = [sys.executable, '-m', 'globaltensor.paddle.distributed.launch']\n"
                        "import globaltensor.paddle.distributed.launch\n"
                        "assert 'numpy' not in sys.modules")
    assert plain["before"] and not deferred["before"]  # eager vs deferred until gt.zeros
    assert deferred["sum"] == plain["sum"] == 6.0
    assert deferred["names"] == plain["names"]
    assert deferred["star"] == plain["star"]
    assert deferred["module"] == plain["module"] == "globaltensor.paddle"
    assert deferred["reduce_op"] == plain["reduce_op"] == "globaltensor.paddle.distributed"
    assert deferred["dp"] == plain["dp"] == "DataParallel"
    assert deferred["t"] == plain["t"] == [1.0, 2.0]


@pytest.mark.parametrize("argv, module", [
    (["py", "-m", "a.b", "x"], "a.b"), (["py", "-u", "-m", "a.b"], "a.b"), (["py", "-um", "a.b"], "a.b"),
    (["py", "-ma.b"], "a.b"), (["py", "-X", "importtime", "-m", "a"], "a"), (["py", "-Ximporttime", "-m", "a"], "a"),
    (["py", "-W", "ignore", "-m", "a"], "a"), (["py", "--check-hash-based-pycs", "always", "-m", "a"], "a"),
    (["py", "-I", "-m", "a"], "a"), (["py", "s.py", "-m", "a"], None), (["py", "-c", "x", "-m", "a"], None),
    (["py"], None), (["py", "-"], None), (["py", "-X", "dev", "s.py"], None),
])
def test_main_module_reads_the_interpreters_argv(argv, module):
    assert main_module(argv) == module
