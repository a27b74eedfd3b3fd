"""OneFlow's flow.comm on local tensors of 3 ranks, as its docs and tests describe each call,
against numpy: in-place results, list outputs replaced, send/recv with and without meta."""
import numpy as np
import pytest

import globaltensor as flow
from conftest import run_ranks


def _value(rank, shape=(2, 3)):
    return (np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 10 * rank)


def _every_call():
    r, n = flow.env.get_rank(), flow.env.get_world_size()
    out = {}
    x = flow.tensor(_value(r))
    flow.comm.all_reduce(x)
    out["all_reduce"] = x.numpy()
    gathered = [None] * n
    flow.comm.all_gather(gathered, flow.tensor(_value(r)))
    out["all_gather"] = [t.numpy() for t in gathered]
    into = flow.zeros(n * 2, 3)
    flow.comm.all_gather_into_tensor(into, flow.tensor(_value(r)))
    out["all_gather_into_tensor"] = into.numpy()
    b = flow.tensor(_value(r))
    flow.comm.broadcast(b, 1)
    out["broadcast"] = b.numpy()
    s = flow.zeros(2, 3)
    flow.comm.scatter(s, [flow.tensor(_value(i) * 2) for i in range(n)] if r == 2 else None, src=2)
    out["scatter"] = s.numpy()
    g = [flow.zeros(2, 3) for _ in range(n)] if r == 0 else None
    flow.comm.gather(flow.tensor(_value(r)), g, dst=0)
    out["gather"] = None if g is None else [t.numpy() for t in g]
    red = flow.tensor(_value(r))
    flow.comm.reduce(red, dst=2)
    out["reduce"] = red.numpy()
    outs = [None] * n
    flow.comm.all_to_all(outs, [flow.tensor(_value(r) + j) for j in range(n)])
    out["all_to_all"] = [t.numpy() for t in outs]
    rs = flow.zeros(2, 3)
    flow.comm.reduce_scatter(rs, [flow.tensor(_value(r) * (j + 1)) for j in range(n)])
    out["reduce_scatter"] = rs.numpy()
    flow.comm.barrier()
    if r == 0:
        flow.comm.send(flow.tensor([[1, 2]]), 1)
        flow.comm.send(flow.tensor([[3.5, 4.5]]), 1, send_meta=False)
    elif r == 1:
        got = flow.comm.recv(0)
        out["recv"] = (got.numpy(), str(got.dtype))
        into = flow.zeros(1, 2)
        assert flow.comm.recv(0, shape=(1, 2), dtype=flow.float32, device="cpu", out=into) is None
        out["recv_into"] = into.numpy()
    with pytest.raises(TypeError, match="local tensors"):
        flow.comm.all_reduce(flow.ones(2, placement=flow.placement("cpu", list(range(n))), sbp=flow.sbp.broadcast))
    return out


def test_comm_calls_as_oneflow_documents_them():
    n = 3
    results = run_ranks(_every_call, n)
    total = sum(_value(i) for i in range(n))
    for r, out in enumerate(results):
        np.testing.assert_array_equal(out["all_reduce"], total)
        for i in range(n):
            np.testing.assert_array_equal(out["all_gather"][i], _value(i))
            np.testing.assert_array_equal(out["all_to_all"][i], _value(i) + r)
        np.testing.assert_array_equal(out["all_gather_into_tensor"], np.concatenate([_value(i) for i in range(n)]))
        np.testing.assert_array_equal(out["broadcast"], _value(1))
        np.testing.assert_array_equal(out["scatter"], _value(r) * 2)
        np.testing.assert_array_equal(out["reduce"], total if r == 2 else _value(r))
        np.testing.assert_array_equal(out["reduce_scatter"], total * (r + 1))
    assert [len(g) for g in results[0]["gather"]] == [2] * n and results[1]["gather"] is None
    for i in range(n):
        np.testing.assert_array_equal(results[0]["gather"][i], _value(i))
    values, dtype = results[1]["recv"]
    np.testing.assert_array_equal(values, [[1, 2]])
    assert dtype == str(flow.int64)
    np.testing.assert_array_equal(results[1]["recv_into"], [[3.5, 4.5]])
