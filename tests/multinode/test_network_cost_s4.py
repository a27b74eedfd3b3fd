"""The boxing cost model's network part (boxing/network.py): on a mesh whose rows are hosts, plans keep bytes inside a host."""
import numpy as np

import globaltensor as gt
from globaltensor.boxing import network, planning

S0, B, P = gt.sbp.split(0), gt.sbp.broadcast, gt.sbp.partial_sum
SHAPE, ITEM = (8, 8), 4
ROWS_ARE_HOSTS = (0, 0, 1, 1)  # ranks 0, 1 on host 0; 2, 3 on host 1


def _mesh():
    return gt.placement("cpu", [[0, 1], [2, 3]])


def _crossing(plan, hosts):
    return sum(network.crossing_bytes(s, SHAPE, hosts) for s in plan.steps)


def test_a_cross_host_plan_moves_fewer_bytes_between_hosts():
    """(B, S(0)) -> (S(0), B): by bytes alone one redistribute (256 bytes, all between hosts) wins;
    with the network priced, an all_gather inside each host (512 bytes, none between) wins."""
    mesh = _mesh()
    flat = planning._plan(mesh, (B, S0), mesh, (S0, B), SHAPE, ITEM, None)
    priced = planning._plan(mesh, (B, S0), mesh, (S0, B), SHAPE, ITEM, ROWS_ARE_HOSTS)
    assert [s.kind.name for s in flat.steps] == ["redistribute"]
    assert _crossing(flat, ROWS_ARE_HOSTS) == flat.bytes == 256
    assert [s.kind.collective for s in priced.steps if s.kind.collective] == ["all_gather"]
    assert priced.steps[0].mesh_dim == 1  # the axis inside a host
    assert _crossing(priced, ROWS_ARE_HOSTS) == 0
    assert network.plan_cost(priced.steps, SHAPE, ITEM, ROWS_ARE_HOSTS) < \
        network.plan_cost(flat.steps, SHAPE, ITEM, ROWS_ARE_HOSTS)


def test_crossing_shares_follow_the_hosts():
    mesh = _mesh()
    across = planning._plan(mesh, (P, B), mesh, (B, B), SHAPE, ITEM, ROWS_ARE_HOSTS)  # all_reduce on axis 0
    inside = planning._plan(mesh, (B, P), mesh, (B, B), SHAPE, ITEM, ROWS_ARE_HOSTS)  # all_reduce on axis 1
    assert _crossing(across, ROWS_ARE_HOSTS) == across.bytes > 0
    assert _crossing(inside, ROWS_ARE_HOSTS) == 0
    line = gt.placement("cpu", [0, 1, 2, 3])  # 1-D over both hosts: 2 of each rank's 3 peers are away
    ring = planning._plan(line, (P,), line, (B,), SHAPE, ITEM, ROWS_ARE_HOSTS)
    np.testing.assert_allclose(_crossing(ring, ROWS_ARE_HOSTS), ring.bytes * 2 / 3)
    move = gt.placement("cpu", [2, 3])
    moved = planning._plan(gt.placement("cpu", [0, 1]), (S0,), move, (S0,), SHAPE, ITEM, ROWS_ARE_HOSTS)
    assert _crossing(moved, ROWS_ARE_HOSTS) == moved.bytes > 0


def test_one_host_prices_bytes_and_plans_as_before():
    assert network.topology() is None  # one process: one host
    mesh = _mesh()
    for src, dst in (((B, S0), (S0, B)), ((P, S0), (S0, B)), ((S0, P), (B, B))):
        plan = planning.plan(mesh, src, mesh, dst, SHAPE, ITEM)
        assert plan.steps == planning._plan(mesh, src, mesh, dst, SHAPE, ITEM, None).steps
        assert network.plan_cost(plan.steps, SHAPE, ITEM, None) == plan.bytes


def test_the_topology_comes_from_the_launchers_environment(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert network.topology() == ROWS_ARE_HOSTS
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert network.topology() is None
