"""Launcher test script: record the environment, optionally fail, sleep or fork, as asked."""
import json
import os
import subprocess
import sys
import time

import numpy as np

import globaltensor as gt
from globaltensor import distributed as dist

out_dir, mode = sys.argv[1], sys.argv[2]
rank = gt.env.get_rank()
keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT",
        "OMP_NUM_THREADS", "GROUP_RANK"]
info = {k: os.environ.get(k) for k in keys}
info["pid"] = os.getpid()
if mode == "fork":  # a grandchild that would outlive a careless launcher
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    info["child"] = child.pid
with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
    json.dump(info, f)
print(f"hello from rank {rank}")
if mode == "allreduce":
    x = np.array([rank + 1.0])
    dist.all_reduce(x)
    print(f"sum={x[0]:.0f}")
elif mode == "fail" and rank == 1:
    time.sleep(0.5)
    sys.stderr.write("about to fail\n")
    sys.exit(3)
elif mode == "kill" and rank == 1:
    time.sleep(0.5)
    os.kill(os.getpid(), 9)
elif mode == "ignore_term":
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if rank == 1:
        time.sleep(0.5)
        raise RuntimeError("rank 1 gives up")
    time.sleep(600)
if mode in ("fail", "kill", "sleep", "fork"):
    time.sleep(600)
