"""What importing globaltensor changes process-wide (docs/architecture.md, "What a job installs"):
nothing outside a job; inside one, numpy's allocator and sys.excepthook (plus two atexit hooks),
all undone at exit. Each case runs in a fresh interpreter."""
import json
import os
import subprocess
import sys
import textwrap
import uuid

import globaltensor

REPO = os.path.dirname(os.path.dirname(os.path.abspath(globaltensor.__file__)))
JOB_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT")

# Prints, as JSON, how the process-wide state after `import globaltensor` (and then after the
# Paddle face) differs from the state before, and what the state is at the very end of exit.
SCRIPT = textwrap.dedent('''
    import atexit, faulthandler, json, logging, os, signal, sys, threading, warnings
    import numpy as np

    multiarray = np._core.multiarray if hasattr(np, "_core") else np.core.multiarray

    def state():
        signals = {}
        for s in signal.valid_signals():
            try:
                signals[signal.Signals(s).name] = repr(signal.getsignal(s))
            except (ValueError, OSError):
                pass
        return {"sys.excepthook": repr(sys.excepthook), "threading.excepthook": repr(threading.excepthook),
                "sys.unraisablehook": repr(sys.unraisablehook), "sys.displayhook": repr(sys.displayhook),
                "signals": signals, "atexit callbacks": atexit._ncallbacks(),
                "numpy allocator": multiarray.get_handler_name(np.ones(1 << 20)),
                "numpy errors": np.geterr(), "numpy print options": repr(np.get_printoptions()),
                "warning filters": repr(warnings.filters),
                "logging root": repr((logging.root.handlers, logging.root.level)),
                "environment": dict(os.environ), "switch interval": sys.getswitchinterval(),
                "recursion limit": sys.getrecursionlimit(), "faulthandler": faulthandler.is_enabled(),
                "trace": repr((sys.gettrace(), sys.getprofile())),
                "threads": sorted(t.name for t in threading.enumerate())}

    def changes(before, after):
        return {k: [before[k], after[k]] for k in before if before[k] != after[k]}

    def at_exit():  # registered before globaltensor's hooks: runs after them
        print(json.dumps({"exit": {"excepthook is the default": sys.excepthook is sys.__excepthook__,
                                   "numpy allocator": multiarray.get_handler_name(np.ones(1 << 20))}}), flush=True)

    atexit.register(at_exit)
    before = state()
    import globaltensor
    after_gt = state()
    print(json.dumps({"globaltensor": changes(before, after_gt),
                      "excepthook is the default": sys.excepthook is sys.__excepthook__}), flush=True)
    import globaltensor.paddle
    print(json.dumps({"paddle": changes(after_gt, state())}), flush=True)
''')


def _run(env):
    base = {k: v for k, v in os.environ.items() if k not in JOB_VARS and not k.startswith("GLOBALTENSOR_")}
    base["PYTHONPATH"] = os.pathsep.join([REPO] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env={**base, **env}, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = {}
    for line in proc.stdout.splitlines():
        out.update(json.loads(line))
    return out


def test_importing_outside_a_job_installs_nothing():
    out = _run({})
    assert out["globaltensor"] == {}, f"import globaltensor changed process-wide state: {out['globaltensor']}"
    assert out["excepthook is the default"]
    assert out["paddle"] == {}, f"import globaltensor.paddle changed process-wide state: {out['paddle']}"
    assert out["exit"] == {"excepthook is the default": True, "numpy allocator": "default_allocator"}


def test_a_rank_installs_what_the_docs_list_and_exit_undoes_it():
    job = {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2",
           "GLOBALTENSOR_JOB_ID": f"installs{uuid.uuid4().hex[:8]}"}  # no store: the rank never joins
    out = _run(job)
    changed = out["globaltensor"]
    assert set(changed) == {"sys.excepthook", "atexit callbacks", "numpy allocator"}, changed
    assert changed["atexit callbacks"][1] - changed["atexit callbacks"][0] == 2
    assert changed["numpy allocator"] == ["default_allocator", "globaltensor_shared_memory"]
    assert not out["excepthook is the default"]
    assert out["paddle"] == {}
    assert out["exit"] == {"excepthook is the default": True, "numpy allocator": "default_allocator"}
