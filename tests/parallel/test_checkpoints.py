"""Temporary directories of saves: a killed save's is removed by the next save to that path, a
live writer's never is."""
import contextlib
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import globaltensor as gt
import globaltensor.serialization as ser

# A writer that makes its temporary directory, writes one file of a 16 MB checkpoint and blocks.
WRITER = """
import sys, time
import numpy as np
import globaltensor as gt

real_save = np.save
def save_then_block(*args, **kwargs):
    real_save(*args, **kwargs)
    print("writing", flush=True)
    time.sleep(600)

np.save = save_then_block
path, sharded = sys.argv[1], sys.argv[2] == "sharded"
values = {f"w{i}": gt.tensor(np.full(1 << 20, 1.0, np.float32)) for i in range(4)}
if sharded:
    values = {k: v.to_global(placement=gt.placement("cpu", [0]), sbp=gt.sbp.broadcast) for k, v in values.items()}
gt.save(values, path, sharded=sharded, save_as_external_data=not sharded)  # one .npy a tensor
"""


@contextlib.contextmanager
def _blocked_writer(path, sharded):
    """A child process blocked in the middle of a save to path; killed on exit."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    child = subprocess.Popen([sys.executable, "-c", WRITER, path, "sharded" if sharded else "gathered"],
                             stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout.readline() == "writing\n", "the writer died before blocking"
        yield child
    finally:
        child.kill()
        child.wait()
        child.stdout.close()


def _tmps(folder):
    """The temporary directories of saves to folder/ck."""
    return sorted(n for n in os.listdir(folder) if n.startswith(".ck.tmp-"))


def _save_and_load(path, sharded, value):
    """Save w = [value, value] to path (global if sharded) and read it back."""
    w = gt.tensor([value, value])
    if sharded:
        w = w.to_global(placement=gt.placement("cpu", [0]), sbp=gt.sbp.broadcast)
    gt.save({"w": w}, path, sharded=sharded)
    return gt.load(path)["w"].numpy().tolist()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sharded", [False, True], ids=["gathered", "sharded"])
def test_save_removes_the_temporary_directory_of_a_killed_save(tmp_path, sharded):
    path = str(tmp_path / "ck")
    with _blocked_writer(path, sharded) as child:
        assert len(_tmps(tmp_path)) == 1
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert len(_tmps(tmp_path)) == 1  # what the killed save left
    assert _save_and_load(path, sharded, 3.0) == [3.0, 3.0]
    assert _tmps(tmp_path) == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sharded", [False, True], ids=["gathered", "sharded"])
def test_save_keeps_the_temporary_directory_of_a_live_save(tmp_path, sharded):
    path = str(tmp_path / "ck")
    with _blocked_writer(path, sharded) as child:
        live = _tmps(tmp_path)
        assert _save_and_load(path, sharded, 3.0) == [3.0, 3.0]
        assert child.poll() is None and _tmps(tmp_path) == live and len(live) == 1


@pytest.mark.timeout(60)
def test_save_removes_only_temporary_directories_it_can_prove_stale(tmp_path):
    host, pid, start = ser.directory._owner().split("-")
    recycled_pid = f".ck.tmp-{host}-{pid}-{int(start) + 1}-abc"  # this pid, but a different process
    other_host = f".ck.tmp-{'0' * 12}-{pid}-{int(start) + 1}-abc"
    old_format = ".ck.tmp-abcd1234"
    for name in (recycled_pid, other_host, old_format):
        os.mkdir(tmp_path / name)
    gt.save({"w": gt.tensor(np.ones(2, np.float32))}, str(tmp_path / "ck"))
    assert _tmps(tmp_path) == sorted([other_host, old_format])
