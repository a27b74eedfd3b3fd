"""Waiting for MPI between hosts at most GLOBALTENSOR_TIMEOUT: a bounded poll that raises, or a watchdog that ends the process.

Two ways, both naming the collective, its ranks and this rank when the time is up:

* `poll(group, request, what, ranks)`: a non-blocking call's request, tested in a loop that
  gives the core away between tests (sched_yield); CollectiveError after the timeout, which the
  caller may catch. all_reduce_async and the calls from GLOBALTENSOR_INTERHOST_BLOCKING_BYTES up
  wait this way.
* a blocking MPI call (faster for small messages: MPI's own progress loop, no Python between
  polls) between `group.armed = [what, ranks]` and `group.armed = None`. One daemon thread per
  process (started by the first group that spans hosts, never at import) looks at every such
  group a few times per timeout; a call armed for longer than the timeout cannot be interrupted,
  so the thread writes the error to stderr and ends the process with EXIT_CODE: the launcher (or
  mpirun) then ends the job's other ranks within seconds, naming this one.
"""
import os
import threading
import time
import weakref

from .._native import CollectiveError

EXIT_CODE = 124  # a process ended by the watchdog exits with this code (as `timeout` does)
_watched = weakref.WeakSet()  # the groups whose `armed` the thread reads
_lock = threading.Lock()
_thread = []  # the watchdog thread, once started


def _message(what, ranks, rank, limit):
    return (f"{what} between hosts on ranks {list(ranks)} (rank {rank}): not complete after {limit:g} s "
            f"(GLOBALTENSOR_TIMEOUT). Between hosts the check that ranks called the same collectives falls "
            f"back to this timeout: a rank may have called a different collective, or ended")


def _ended(group, ranks):
    """Which of `ranks` the job's store knows to have ended, and how (group.ended), as the error's tail."""
    try:
        lines = group.ended(ranks)
    except Exception:  # noqa: BLE001 - the store may be gone with the rank that hosted it
        return ""
    return "".join(f"\n  rank {r} ended: {how}" for r, how in lines)


def poll(group, request, what, ranks, several=None):
    """Wait for a non-blocking MPI call (or, with `several`, for all of those requests; request is then
    MPI.Request), at most group.timeout seconds; CollectiveError after."""
    done = (lambda: request.Testall(several)) if several is not None else request.Test
    if done():
        return
    deadline = time.monotonic() + group.timeout
    while not done():
        # give the core away between polls: ranks often outnumber cores, and a peer (or this rank's
        # MPI progress) needs one; spinning without it costs a scheduler slice (~10 ms) per call, and
        # even 200 tight polls before the first yield made a 1 KiB all_reduce 2-3x slower (4 ranks, 2 cores)
        os.sched_yield()
        if time.monotonic() > deadline:
            raise CollectiveError(_message(what, ranks, group.rank, group.timeout) + _ended(group, ranks))


class Done:
    """What all_reduce_async returns where the all-reduce already ran."""

    def wait(self):
        return None

    def done(self):
        return True


class InFlight:
    """What all_reduce_async returns for an MPI all-reduce left in flight on `group` (polled at wait())."""

    def __init__(self, group, request):
        self._group, self._request, self._done = group, request, False

    def wait(self):
        if not self._done:
            poll(self._group, self._request, "all_reduce_async", self._group.ranks)
            self._done = True
            self._group._in_flight.remove(self)

    def done(self):
        return self._done or bool(self._request.Test())


def watch(group):
    """Watch `group.armed` from now on: None, or [what, ranks] while a blocking MPI call runs, a new list
    per call (the thread tells calls apart by identity; a tuple of constants would be one object);
    the first call starts the thread."""
    with _lock:
        _watched.add(group)
        if not _thread:
            thread = threading.Thread(target=_run, name="globaltensor-mpi-watchdog", daemon=True)
            thread.start()
            _thread.append(thread)


def _run():
    seen = {}  # id(group) -> (the armed list last seen (held: no new list takes its id), when first seen)
    while True:
        groups = list(_watched)
        tick = min([1.0] + [max(0.05, g.timeout / 10) for g in groups])
        time.sleep(tick)
        now, still = time.monotonic(), {}
        for group in groups:
            armed = group.armed
            if armed is None:
                continue
            last = seen.get(id(group))
            if last is None or last[0] is not armed:
                last = (armed, now)
            still[id(group)] = last
            if now - last[1] >= group.timeout:
                _expire(group, armed)
        seen = still


def _expire(group, armed):
    what, ranks = armed
    text = (f"globaltensor: CollectiveError: {_message(what, ranks, group.rank, group.timeout)}. A blocking MPI "
            f"call cannot be interrupted, so rank {group.rank} ends here (exit code {EXIT_CODE}) instead of "
            f"raising; GLOBALTENSOR_INTERHOST_BLOCKING_BYTES=0 makes every call between hosts non-blocking, and "
            f"then this error is an exception")
    try:
        os.write(2, text.encode())
        threading.Timer(3.0, os._exit, (EXIT_CODE,)).start()  # the store's answer is waited for 3 s at most
        os.write(2, (_ended(group, ranks) + "\n").encode())
    finally:
        os._exit(EXIT_CODE)
