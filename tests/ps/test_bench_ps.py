"""The PS benchmark's driver (benchmarks/bench_ps.py): its rows, its commands, the job watcher's RSS by
role and its cleanup, the CTR script's data — without running a benchmark."""
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
sys.path.insert(0, os.path.join(REPO, "benchmarks", "ps"))

import bench_ps  # noqa: E402
import paddle_ctr  # noqa: E402
from _jobwatch import Watched, _start_time, alive, descendants  # noqa: E402


def _args(**kw):
    import argparse
    base = dict(paddle_python="/venv/bin/python", k_steps=100, steps=100, windows=3, warmup=20, batch=512,
                ours_table="auto")
    base.update(kw)
    return argparse.Namespace(**base)


def test_cases_are_issue_30s_rows():
    rows = bench_ps.cases(["paddle", "ours"], [1, 2], paddle_sync=True)
    assert ("paddle", "async", 1) in rows and ("paddle", "geo", 2) in rows and ("paddle", "sync", 1) in rows
    assert {(m, s) for side, m, s in rows if side == "ours"} == {
        (m, s) for m in ("sync", "async", "geo") for s in (1, 2)} | {("local", 0)}
    assert ("paddle", "local", 0) in rows
    assert ("paddle", "sync", 1) not in bench_ps.cases(["paddle"], [1], paddle_sync=False)


def test_commands_use_each_sides_launcher_and_the_same_flags():
    args = _args()
    theirs = bench_ps.command("paddle", "geo", 2, args, "/o")
    ours = bench_ps.command("ours", "geo", 2, args, "/o")
    assert theirs[:3] == ["/venv/bin/python", "-m", "paddle.distributed.launch"]
    assert ours[:3] == [sys.executable, "-m", "globaltensor.paddle.distributed.launch"]
    assert "--server_num=2" in theirs and "--worker_num=2" in ours
    assert theirs[theirs.index("--mode"):] == ours[ours.index("--mode"):]
    assert theirs[5].endswith("paddle_ctr.py") and ours[5].endswith("ours_ctr.py")
    local = bench_ps.command("ours", "local", 0, args, "/o")
    assert "-m" not in local and local[1].endswith("ours_ctr.py")
    assert bench_ps.command("ours", "geo", 1, _args(ours_table="sparse_embedding"), "/o")[-2:] == [
        "--table", "sparse_embedding"]
    assert "PYTHONPATH" not in bench_ps.environment("paddle", 1)
    assert bench_ps.environment("ours", 1)["FLAGS_enable_pir_api"] == "0"


def test_ratios_follow_the_goals():
    rows = [{"side": "paddle", "mode": "async", "servers": 1, "samples_s": 100.0},
            {"side": "paddle", "mode": "geo", "servers": 1, "samples_s": 200.0},
            {"side": "ours", "mode": "sync", "servers": 1, "samples_s": 150.0},
            {"side": "ours", "mode": "geo", "servers": 1, "samples_s": 100.0},
            {"side": "ours", "mode": "async", "servers": 2, "samples_s": 100.0}]
    got = bench_ps.ratios(rows)
    assert got == {"ours sync / paddle async, 1 server(s)": 1.5, "ours geo / paddle geo, 1 server(s)": 0.5}


def test_generated_data_is_the_models_and_deterministic():
    a, b = next(paddle_ctr.batches(8, 3)), next(paddle_ctr.batches(8, 3))
    assert sorted(a) == sorted(["dense", "label"] + [f"C{i}" for i in range(26)])
    assert a["dense"].shape == (8, 13) and a["dense"].dtype == np.float32
    assert a["C0"].shape == (8, 1) and a["C0"].dtype == np.int64 and 0 <= a["C25"].min() < 10 ** 6
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["C0"], next(paddle_ctr.batches(8, 4))["C0"])
    args = paddle_ctr.parse_args(["--mode", "geo"])
    assert paddle_ctr.table_kind(args) == "embedding"
    assert paddle_ctr.table_kind(paddle_ctr.parse_args(["--mode", "async"])) == "sparse_embedding"


CHILDREN = textwrap.dedent("""
    import os, subprocess, sys, time
    code = "import numpy as np, time; a = np.ones(40 << 17); time.sleep(60)"   # 40 MiB touched
    for role in ("PSERVER", "TRAINER"):
        subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ, TRAINING_ROLE=role))
    time.sleep(60)
""")


@pytest.mark.timeout(90)
def test_watcher_measures_rss_by_role_and_leaves_nothing_behind(tmp_path):
    job = Watched([sys.executable, "-c", CHILDREN], str(tmp_path), dict(os.environ), str(tmp_path / "log"))
    seen = []
    try:
        deadline = time.time() + 50  # the children sleep 60 s
        while time.time() < deadline:
            job.poll()
            if (job.peak_mb("server") or 0) > 40 and (job.peak_mb("trainer") or 0) > 40:
                break
            time.sleep(0.2)
        seen = [(pid, _start_time(pid)) for pid in descendants(job.proc.pid)]
        assert job.peak_mb("server") > 40 and job.peak_mb("trainer") > 40
        assert len(seen) == 2
        rc, why = job.wait(timeout=time.time() - job.t0 + 0.5)
        assert (rc, why) == (None, "timeout")
    finally:
        job.kill()
    assert job.proc.poll() is not None
    for pid, start in seen:
        assert not alive(pid, start), f"process {pid} outlived the kill"


@pytest.mark.timeout(30)
def test_watcher_ends_a_job_that_hangs_after_its_results(tmp_path):
    job = Watched([sys.executable, "-c", "import time; time.sleep(60)"], str(tmp_path), dict(os.environ),
                  str(tmp_path / "log"), default_role="trainer")
    try:
        rc, why = job.wait(timeout=20, done=lambda: True, grace=0.5)
    finally:
        job.kill()
    assert (rc, why) == (None, "stuck after results")
    assert job.peak_mb("trainer") > 1
    assert subprocess.run(["kill", "-0", str(job.proc.pid)], capture_output=True).returncode != 0
