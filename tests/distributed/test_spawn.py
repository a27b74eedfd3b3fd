"""gt.distributed.spawn: results, environment, failures, timeouts."""
import os
import time

import pytest

import globaltensor as gt
from globaltensor.distributed import SpawnError, spawn


def _env():
    keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT"]
    return {k: os.environ[k] for k in keys}, gt.env.get_rank(), gt.env.get_world_size(), gt.env.get_node_size()


def test_results_and_environment_contract():
    results = spawn(_env, nprocs=3, timeout=60)
    for rank, (env, r, k, nodes) in enumerate(results):
        assert (r, k, nodes) == (rank, 3, 1)
        assert env["RANK"] == env["LOCAL_RANK"] == str(rank) and env["WORLD_SIZE"] == "3"
        assert env["LOCAL_WORLD_SIZE"] == "3" and env["NODE_RANK"] == "0" and int(env["MASTER_PORT"]) > 0


def _fail_on_rank_one():
    if gt.env.get_rank() == 1:
        raise KeyError("the traceback must reach the parent")
    time.sleep(60)  # must be stopped, not waited for


def test_failing_rank_traceback_is_raised_and_others_stopped():
    start = time.monotonic()
    with pytest.raises(SpawnError) as info:
        spawn(_fail_on_rank_one, nprocs=3, timeout=60, grace=1.0)
    assert time.monotonic() - start < 10
    assert info.value.rank == 1 and info.value.exit_code == 1
    assert "KeyError: 'the traceback must reach the parent'" in str(info.value)
    assert "_fail_on_rank_one" in str(info.value)


def _crash():
    if gt.env.get_rank() == 0:
        os.kill(os.getpid(), 9)
    time.sleep(60)


def test_rank_killed_by_a_signal():
    with pytest.raises(SpawnError, match="rank 0 was killed by SIGKILL") as info:
        spawn(_crash, nprocs=2, timeout=60, grace=1.0)
    assert info.value.exit_code == 137


def _sleep_forever():
    print("started", flush=True)
    time.sleep(600)


def test_hard_timeout_names_running_ranks():
    start = time.monotonic()
    with pytest.raises(SpawnError, match=r"timed out after 1.5 s; rank\(s\) \[0, 1\]"):
        spawn(_sleep_forever, nprocs=2, timeout=1.5, grace=0.5)
    assert time.monotonic() - start < 8


def _talk(word):
    print(f"{word} from {gt.env.get_rank()}")
    return word


def test_output_is_prefixed_and_args_are_passed(capfd):
    assert spawn(_talk, args=("hello",), nprocs=2, timeout=60) == ["hello", "hello"]
    out = capfd.readouterr().out
    assert "[rank 0] hello from 0" in out and "[rank 1] hello from 1" in out


def test_closures_and_lambdas_travel_by_value():
    offset = 41
    assert spawn(lambda: gt.env.get_rank() + offset, nprocs=2, timeout=60) == [41, 42]


def test_bad_nprocs():
    with pytest.raises(ValueError, match="nprocs"):
        spawn(_env, nprocs=0)
