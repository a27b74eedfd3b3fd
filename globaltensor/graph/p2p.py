"""A program's send and recv: posted to a per-peer link, matched in tag order where a recv waits (or at once)."""
import numpy as np

from .._native import CollectiveError, CollectiveTimeoutError
from ..backends.devices import device
from ..distributed import collectives


class Link:
    """One program's posted transfers with one peer rank. The job's point-to-point transport is an
    ordered channel per pair of ranks, so both sides must run their transfers in one order: a
    flush runs everything posted so far by tag (the register that crosses), the same order on both
    sides, so two ranks that both send before they receive do not wait on each other."""

    def __init__(self, peer):
        self.peer, self.posted = peer, []

    def post(self, tag, kind, array):
        self.posted.append((tag, kind, array))

    def flush(self):
        posted, self.posted = sorted(self.posted, key=lambda p: p[0]), []
        for tag, kind, array in posted:
            try:
                (collectives.send if kind == "send" else collectives.recv)(array, self.peer)
            except CollectiveTimeoutError as exc:
                raise CollectiveTimeoutError(f"program {kind} of tag {tag} with rank {self.peer} timed out "
                                             f"(the peer did not post its {'recv' if kind == 'send' else 'send'} "
                                             f"of that tag): {exc}") from exc
            except CollectiveError as exc:
                raise CollectiveError(f"program {kind} of tag {tag} with rank {self.peer} failed: {exc}") from exc


class Send:
    """A piece posted to a peer (a copy: the register's buffer may be reused before the transfer
    runs); deferred while a recv from that peer follows in the program (it flushes), else at once."""

    def __init__(self, peer, tag=None, link=None, defer=False):
        self.peer, self.tag, self.link, self.defer = peer, tag, link, defer

    def __call__(self, piece):
        host = piece if isinstance(piece, np.ndarray) else device("cuda").to_host(piece)
        link = self.link or Link(self.peer)
        link.post(self.tag if self.tag is not None else 0, "send", np.array(host, order="C", copy=True))
        if not self.defer:
            link.flush()


class Recv:
    """A piece of known shape and dtype from a peer: posted, then the link flushed in tag order
    (this recv's wait, with the sends posted before it)."""

    def __init__(self, peer, shape, dtype, dev, tag=None, link=None):
        self.peer, self.shape, self.dtype, self.dev = peer, tuple(shape), np.dtype(dtype), dev
        self.tag, self.link = tag, link

    def __call__(self):
        out = np.empty(self.shape, self.dtype)
        link = self.link or Link(self.peer)
        link.post(self.tag if self.tag is not None else 0, "recv", out)
        link.flush()
        return out if self.dev is device("cpu") else self.dev.from_host(out)


def link_sends(instrs):
    """Give the send/recv instructions one Link per peer, and defer each send that a recv from
    the same peer follows (the recv flushes it)."""
    links, later_recv = {}, set()
    for ins in reversed(instrs):
        if ins.kind not in ("send", "recv"):
            continue
        peer = int(ins.detail["peer"])
        ins.fn.link, ins.fn.tag = links.setdefault(peer, Link(peer)), ins.detail.get("tag")
        if ins.kind == "send":
            ins.fn.defer = peer in later_recv
        else:
            later_recv.add(peer)
    return instrs
