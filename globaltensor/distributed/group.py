"""Process groups: an ordered set of global ranks that run collectives together."""
from .._native import CollectiveError, collective_hint
from .store import PeersLeft
from .world import world


class Group:
    """Ranks that run collectives together; members are numbered by their order in `ranks`.

    Creating a group is local and cheap; its shared-memory segment is made on the first
    collective, by the members only. Groups with the same ranks share one segment.
    """

    __slots__ = ("ranks", "_native")

    def __init__(self, ranks):
        ranks = tuple(int(r) for r in ranks)
        size = world().world_size
        if not ranks:
            raise ValueError("a group needs at least one rank")
        if len(set(ranks)) != len(ranks):
            raise ValueError(f"a group's ranks must be distinct, got {list(ranks)}")
        bad = [r for r in ranks if not 0 <= r < size]
        if bad:
            raise ValueError(f"ranks {bad} are outside [0, {size}) (WORLD_SIZE={size})")
        self.ranks = ranks
        self._native = None

    @property
    def size(self):
        return len(self.ranks)

    @property
    def index(self):
        """This rank's position in the group, or -1 when it is not a member."""
        rank = world().rank
        return self.ranks.index(rank) if rank in self.ranks else -1

    def native(self, op_name):
        """The native group; ValueError (before any communication) when this rank is not in it."""
        native = self._native
        if native is None:
            if world().rank not in self.ranks:
                raise ValueError(f"{op_name}: rank {world().rank} is not in the group of ranks {list(self.ranks)}")
            try:
                native = self._native = world().group(self.ranks)
            except PeersLeft as exc:  # this rank's first collective: joining waits for every rank
                raise CollectiveError(
                    f"{op_name} on ranks {list(self.ranks)}: rank(s) {sorted(exc.left)} will not come: they ended "
                    f"before joining the job (each rank joins on its first collective). The ranks were:"
                    f"{world().join_states(op_name, self.ranks)}\n{collective_hint()}") from None
        return native

    def __repr__(self):
        return f"Group(ranks={list(self.ranks)})"

    def __eq__(self, other):
        return isinstance(other, Group) and other.ranks == self.ranks

    def __hash__(self):
        return hash(self.ranks)


_world_group = None


def new_group(ranks):
    """A group of the given global ranks (local and cheap; members only communicate)."""
    return Group(ranks)


def world_group():
    """The group of every rank in the job."""
    global _world_group
    if _world_group is None:
        _world_group = Group(range(world().world_size))
    return _world_group


_job_barriers = [0]  # how many job_barrier calls this rank has made: the store key of the next


def job_barrier():
    """Wait until every rank of the job arrives, on one machine or several (this is gt.env.barrier):
    the world group's shared memory on one node, the rendezvous store across nodes. Unlike
    gt.distributed.barrier it takes no group and gt.debug.count_collectives does not count it."""
    w = world()
    w.join()
    if len(set(w.host_keys)) > 1:
        _job_barriers[0] += 1
        w.store.barrier(f"env/barrier/{_job_barriers[0]}", w.rank, w.world_size)
    else:
        world_group().native("barrier").barrier()
