"""send/recv instructions of a program are posted and matched in tag order: two ranks that both send a big
piece before they receive exchange it (blocking sends in program order would wait on each other); a peer
that never sends makes the recv time out naming it."""
import os
import time

import numpy as np
import pytest

import globaltensor as gt
from conftest import run_ranks

B = gt.sbp.broadcast
N = 1 << 21  # 8 MiB of float32 each way


def _exchange_program(rank):
    """rank's program: send its input to the other rank, receive the other's, return their sum."""
    from globaltensor.graph import Instr, Program, Reg
    from globaltensor.tensor import Layout
    peer = 1 - rank
    lay = Layout.of((N,), gt.float32, gt.placement("cpu", [rank]), (B,))
    regs = [Reg(0, "input", lay, None, (N,), np.float32), Reg(1, "value", lay, None, (N,), np.float32),
            Reg(2, "value", lay, None, (N,), np.float32)]
    instrs = [Instr("send", "send", None, [0], [], detail={"peer": peer, "tag": 100 + rank}),  # both send first
              Instr("recv", "recv", None, [], [1], plain=True, detail={"peer": peer, "tag": 100 + peer}),
              Instr("op", "add", None, [0, 1], [2])]
    return Program(regs, instrs, [0], [2], f"exchange {rank}")


def _both_send_first():
    from globaltensor.graph import ProgramState, runnable
    from globaltensor.graph.rebuild import rebuild
    rank = gt.env.get_rank()
    program = rebuild(_exchange_program(rank), ProgramState({}), rank)
    x = np.full(N, rank + 1, np.float32) * np.arange(N, dtype=np.float32) / N
    got = runnable(program).fn(x)[0]
    return rank, program.collectives(), float(got[0]), float(got[-1]), bool(np.allclose(got, 3 * np.arange(N) / N))


def test_two_ranks_that_both_send_before_receiving_exchange_their_pieces():
    for rank, collectives, first, last, equal in run_ranks(_both_send_first, 2, timeout=120):
        assert collectives == ["send", "recv"]
        assert equal and first == 0.0 and last == pytest.approx(3 * (N - 1) / N)


def _one_never_sends(done_flag):
    from globaltensor.graph import ProgramState, runnable
    from globaltensor.graph.rebuild import rebuild
    from globaltensor.distributed import collectives
    rank = gt.env.get_rank()
    hello = np.zeros(1, np.float32)  # both join the job and the pair's channel first
    collectives.send(hello, 1) if rank == 0 else collectives.recv(hello, 0)
    if rank == 1:  # alive but silent until rank 0 has its answer: its recv must time out naming rank 1
        deadline = time.monotonic() + 60
        while not os.path.exists(done_flag) and time.monotonic() < deadline:
            time.sleep(0.05)
        return "silent"
    program = _exchange_program(0)
    program.instrs = program.instrs[1:]  # only the recv, then the add
    rebuild(program, ProgramState({}), 0)
    try:
        runnable(program).fn(np.zeros(N, np.float32))
    except Exception as exc:  # noqa: BLE001 - the message is the test
        return f"{type(exc).__name__}: {exc}"
    finally:
        open(done_flag, "w").close()
    return "no error"


def test_a_recv_whose_peer_never_sends_times_out_naming_the_peer(tmp_path):
    said, _ = run_ranks(_one_never_sends, 2, str(tmp_path / "done"), timeout=120, env={"GLOBALTENSOR_TIMEOUT": "3"})
    assert "CollectiveTimeoutError" in said and "rank 1" in said and "tag 101" in said, said
