"""The cost model's network part: on a job spanning hosts, a byte between hosts costs NETWORK_FACTOR bytes.

Plans are compared by cost = bytes through shared memory + NETWORK_FACTOR x bytes over the
network (Plan.bytes stays the plain count). The topology is each global rank's node, from the
launcher's environment (the same on every rank before any rank joins); on one node cost is
bytes. Steps along a mesh axis charge each of their groups by the share of its pairs of members
on different hosts (collectives exchange between every pair, pieces even); moves between
placements charge exactly the blocks whose sender and receiver are on different hosts.
"""
import functools
import math
import os

from .. import env

from .steps import REDISTRIBUTE, SPLIT_TO_PARTIAL_MOVED, overlap_blocks, split_to_partial_blocks

# what one byte over the network costs in bytes through shared memory (a veth pair or a NIC against memcpy)
NETWORK_FACTOR = float(os.environ.get("GLOBALTENSOR_NETWORK_FACTOR", "8"))


def topology():
    """Each global rank's node index (a tuple), or None on one node. From the launcher's environment
    (WORLD_SIZE, LOCAL_WORLD_SIZE, or mpirun's), so every rank has the same answer before any
    rank joins: ranks are numbered node by node (our launcher's and mpirun's by-slot order)."""
    return _nodes(env.get_world_size(), env.get_local_world_size())


@functools.lru_cache(maxsize=16)
def _nodes(world_size, local_world_size):
    if local_world_size < 1 or world_size <= local_world_size or world_size % local_world_size:
        return None
    return tuple(r // local_world_size for r in range(world_size))


def plan_cost(steps, global_shape, itemsize, hosts):
    """What the steps cost: their bytes, a byte between hosts counted NETWORK_FACTOR times."""
    if hosts is None:
        return sum(s.bytes for s in steps)
    return sum(s.bytes + (NETWORK_FACTOR - 1) * crossing_bytes(s, global_shape, hosts) for s in steps)


def crossing_bytes(step, global_shape, hosts):
    """The bytes of one step whose sender and receiver are on different hosts."""
    if not step.bytes:
        return 0
    if step.kind in (REDISTRIBUTE, SPLIT_TO_PARTIAL_MOVED):
        return _crossing_blocks(step, global_shape, hosts)
    placement, axis = step.placement, step.mesh_dim
    groups = _axis_groups(placement, axis)
    share = sum(_crossing_share([hosts[r] for r in g]) for g in groups) / len(groups)
    return step.bytes * share


def _crossing_blocks(step, global_shape, hosts):
    src_pl, dst_pl = step.src_placement, step.placement
    if step.kind is REDISTRIBUTE:
        blocks = overlap_blocks(src_pl, step.src, dst_pl, step.dst, tuple(global_shape))
    else:
        blocks = split_to_partial_blocks(src_pl, step.src, dst_pl, tuple(global_shape))
    moved = [(r, s, math.prod(b - a for a, b in box)) for r, s, box in blocks if r != s]
    total = sum(n for _, _, n in moved)
    return step.bytes * sum(n for r, s, n in moved if hosts[r] != hosts[s]) / total if total else 0


def _axis_groups(placement, axis):
    """The rank lists along mesh axis `axis` (other coordinates fixed)."""
    groups = {}
    for r in placement.rank_list():
        coord = list(placement.mesh_coord(r))
        coord[axis] = None
        groups.setdefault(tuple(coord), []).append(r)
    return list(groups.values())


def _crossing_share(member_hosts):
    """Of the ordered pairs of distinct members, the share on different hosts."""
    k = len(member_hosts)
    if k < 2:
        return 0.0
    counts = {}
    for h in member_hosts:
        counts[h] = counts.get(h, 0) + 1
    return (k * k - sum(n * n for n in counts.values())) / (k * k - k)
