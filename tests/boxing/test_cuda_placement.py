"""cuda placements end to end: every op, every SBP pair, cpu<->cuda moves, training scripts.

Each test runs twice: on simulated_cupy (GLOBALTENSOR_CUDA_SIMULATE=1: device arrays that refuse
to mix with numpy, no GPU needed, so CI checks that host and device stay apart) and, marked
`cuda`, on real GPUs with cupy (ranks may share one GPU). Values are compared with numpy.
"""
import itertools
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import globaltensor as gt
from conftest import REPO, run_ranks
from globaltensor.backends import simulated_cupy

S0, S1, B, P = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast, gt.sbp.partial_sum
SIMULATED = {"GLOBALTENSOR_CUDA_SIMULATE": "1"}
MODES = [pytest.param(SIMULATED, id="simulated"), pytest.param({}, id="gpu", marks=pytest.mark.cuda)]
ROOT = REPO


def on_device(t):
    """The piece of a global cuda tensor is a device array, never numpy."""
    return not isinstance(t.to_local()._local, np.ndarray)


@pytest.mark.parametrize("env", MODES)
@pytest.mark.parametrize("nprocs, mesh_2d", [(2, False), (4, True)])
def test_every_op_on_cuda_matches_one_process(nprocs, mesh_2d, env):
    import test_every_op as spec
    spec.compare_with_one_process(run_ranks(spec._all_specs, nprocs, mesh_2d, "cuda", timeout=600, env=env)[0])


def _every_pair(mesh_2d):
    """Every SBP pair on cuda: values, pieces on the device, and the same collectives as on cpu."""
    ranks = [[0, 1], [2, 3]] if mesh_2d else list(range(gt.env.get_world_size()))
    full = (np.arange(35, dtype=np.float32).reshape(5, 7) - 10) / 4
    sbps = list(itertools.product([S0, S1, B, P], repeat=len(np.shape(ranks))))
    for src, dst in itertools.product(sbps, sbps):
        counts = []
        for kind in ("cpu", "cuda"):
            x = gt.tensor(full, placement=gt.placement(kind, ranks), sbp=src)
            with gt.debug.count_collectives() as c:
                y = x.to_global(sbp=dst)
            counts.append(dict(c))
            assert kind == "cpu" or on_device(y)
            np.testing.assert_array_equal(y.numpy(), full, err_msg=f"{kind} {src}->{dst}")
        assert counts[0] == counts[1], (src, dst, counts)
    return len(sbps) ** 2


@pytest.mark.parametrize("env", MODES)
@pytest.mark.parametrize("nprocs, mesh_2d", [(3, False), (4, True)])
def test_every_sbp_pair_on_cuda(nprocs, mesh_2d, env):
    assert run_ranks(_every_pair, nprocs, mesh_2d, env=env)[0] == (16 if not mesh_2d else 256)


def _moves():
    full = np.arange(24, dtype=np.float32).reshape(6, 4)
    cpu, cuda = gt.placement("cpu", [0, 1]), gt.placement("cuda", [0, 1])
    cases = [(cpu, S0, cuda, B), (cpu, P, cuda, S1), (cuda, S1, cpu, S0), (cuda, P, gt.placement("cpu", [1]), B),
             (gt.placement("cpu", [0]), B, cuda, P), (cuda, S0, gt.placement("cuda", [1, 0]), S0)]
    for src_pl, src, dst_pl, dst in cases:
        x = gt.tensor(full, placement=src_pl, sbp=src, requires_grad=True)
        y = x.to_global(placement=dst_pl, sbp=dst)
        assert y.placement == dst_pl and y.sbp == (dst,)
        assert on_device(y) == (dst_pl.type == "cuda") or gt.env.get_rank() not in dst_pl
        np.testing.assert_array_equal(y.numpy(), full, err_msg=f"{src_pl.type} {src} -> {dst_pl.type} {dst}")
        (y * y).sum().backward()  # the gradient comes back across the move
        assert x.grad.placement == src_pl and on_device(x.grad) == (src_pl.type == "cuda") or \
            gt.env.get_rank() not in src_pl
        np.testing.assert_allclose(x.grad.numpy(), 2 * full)
    local = gt.tensor(full[gt.env.get_rank() * 3:][:3])  # a local numpy piece onto a cuda placement
    z = local.to_global(placement=cuda, sbp=S0)
    assert on_device(z)
    np.testing.assert_array_equal(z.numpy(), full)
    return len(cases)


@pytest.mark.parametrize("env", MODES)
def test_cpu_cuda_moves_are_boxing_steps(env):
    assert run_ranks(_moves, 2, env=env) == [6, 6]


def _partial_to_broadcast_is_one_all_reduce():
    pl = gt.placement("cuda", [0, 1])
    x = gt.ones(1000, placement=pl, sbp=P, dtype="float16")
    with gt.debug.count_collectives() as c:
        y = x.to_global(sbp=B)
    assert dict(c) == {"all_reduce": 1} and on_device(y)
    bf = gt.full((3, 5), 1.5, placement=pl, sbp=S0, dtype="bfloat16")
    assert on_device(bf) and bf.dtype == gt.bfloat16
    return float(y.sum().item()), float((bf * 2).sum().item())


@pytest.mark.parametrize("env", MODES)
def test_half_types_and_the_all_reduce_plan(env):
    assert run_ranks(_partial_to_broadcast_is_one_all_reduce, 2, env=env) == [(1000.0, 45.0)] * 2


def _launch(script, device, cwd, env):
    res = subprocess.run([sys.executable, "-m", "globaltensor.distributed.launch", "--nproc_per_node", "2",
                          os.path.join(ROOT, "examples", script), device], cwd=cwd, capture_output=True, text=True,
                         timeout=300, env={**os.environ, **env})
    assert res.returncode == 0, res.stderr[-3000:]
    return re.findall(r"step \d+ loss ([0-9.]+)", res.stdout)


@pytest.mark.parametrize("env", MODES)
def test_oneflow_tutorial_scripts_on_cuda(tmp_path, env):
    """The tutorial's scripts with placement("cuda", [0, 1]) (two ranks on one GPU: the IPC path):
    the losses of the cpu run, the same digits when simulated, within float32 rounding on a GPU."""
    for script in ("oneflow_tutorial_dp.py", "oneflow_tutorial_mp.py"):
        on_cpu = _launch(script, "cpu", tmp_path, env)
        on_cuda = _launch(script, "cuda", tmp_path, env)
        assert len(on_cuda) == 10, script
        if env:
            assert on_cuda == on_cpu, script
        np.testing.assert_allclose(np.array(on_cuda, float), np.array(on_cpu, float), rtol=1e-5, err_msg=script)


def test_simulated_arrays_keep_host_and_device_apart():
    x = simulated_cupy.asarray(np.arange(6.0).reshape(2, 3))
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(x)
    with pytest.raises(TypeError, match="numpy array where a device array belongs"):
        x + np.ones(3)
    with pytest.raises(TypeError, match="numpy array where a device array belongs"):
        x[0] = np.zeros(3)
    y = np.exp(x) + 1  # numpy's functions reach device arrays, as they reach cupy's
    assert type(y) is simulated_cupy.ndarray and type(x.sum()) is simulated_cupy.ndarray and x.sum().ndim == 0
    np.testing.assert_allclose(simulated_cupy.asnumpy(y), np.exp(np.arange(6.0).reshape(2, 3)) + 1)
    assert type(np.concatenate([x, x])) is simulated_cupy.ndarray


def _constant_factories():
    """zeros / ones / full / arange on a cuda placement in several dtypes and layouts: (name, uploads, value)."""
    import ml_dtypes
    pl = gt.placement("cuda", [0, 1])
    made = []
    for name, make in [("zeros", lambda s: gt.zeros(5, 3, placement=pl, sbp=s)),
                       ("ones int32", lambda s: gt.ones(5, 3, dtype=gt.int32, placement=pl, sbp=s)),
                       ("full 0.1 float16", lambda s: gt.full((5, 3), 0.1, dtype=gt.float16, placement=pl, sbp=s)),
                       ("full True", lambda s: gt.full((5, 3), True, placement=pl, sbp=s)),
                       ("full 3 bfloat16", lambda s: gt.full((5, 3), 3.0, dtype=ml_dtypes.bfloat16, placement=pl, sbp=s)),
                       ("full numpy scalar", lambda s: gt.full((5, 3), np.float64(2.5), placement=pl, sbp=s)),
                       ("arange ints", lambda s: gt.arange(1, 16, 1, placement=pl, sbp=s)),
                       ("arange floats", lambda s: gt.arange(0.5, 5.0, 0.3, placement=pl, sbp=s))]:
        for sbp in (S0, B, P):
            simulated_cupy.transfers.clear()
            t = make(sbp)
            uploads = simulated_cupy.transfers["to_device"]
            assert on_device(t)
            made.append((name, str(sbp), uploads, t.to_global(sbp=B).to_local().numpy()))
    return made


def test_constant_factories_fill_pieces_on_the_device():
    """A Python number in numpy's own dtype is filled on the device (no upload), as arange's values
    are computed there; other values (bfloat16, a numpy scalar) go up from the host; every value is
    numpy's, bit for bit."""
    want = {"zeros": np.zeros((5, 3), np.float32), "ones int32": np.ones((5, 3), np.int32),
            "full 0.1 float16": np.full((5, 3), 0.1, np.float16), "full True": np.full((5, 3), True),
            "full 3 bfloat16": np.full((5, 3), 3.0, np.float32), "full numpy scalar": np.full((5, 3), 2.5, np.float32),
            "arange ints": np.arange(1, 16), "arange floats": (0.5 + 0.3 * np.arange(15.0)).astype(np.float32)}
    for rank_made in run_ranks(_constant_factories, 2, env=SIMULATED):
        for name, sbp, uploads, value in rank_made:
            from_host = name in ("full 3 bfloat16", "full numpy scalar")
            allowed = ({0, 1} if from_host else {0}) if sbp == "P" else {int(from_host)}  # P: one rank holds the value
            assert uploads in allowed, (name, sbp, uploads)
            assert value.dtype == want[name].dtype or name == "full 3 bfloat16", (name, value.dtype)
            assert value.astype(want[name].dtype).tobytes() == want[name].tobytes(), (name, sbp)


class Uncounted:
    """The host collectives, unseen by gt.debug.count_collectives (device_collectives counts)."""

    def __init__(self, module):
        self.module = module

    def __getattr__(self, name):
        def call(*args, **kwargs):
            with self.module.unobserved():
                return getattr(self.module, name)(*args, **kwargs)
        return call


class HostNccl:
    """pynccl.Communicator's calls over the host collectives, on simulated device arrays: a twin
    that checks device_collectives' NCCL path (offsets, uneven sizes, grouped send/recv)."""

    def __init__(self, ranks):
        from globaltensor.distributed import collectives
        self.ranks, self.host, self.pending = tuple(ranks), Uncounted(collectives), None

    def all_reduce(self, x, out, op="sum", dtype=None):
        out[...] = simulated_cupy.asarray(self.host.all_reduce(x.get(), op=op, group=list(self.ranks)))

    def all_gather(self, x, out, dtype=None):
        gathered = self.host.all_gather(x.get().reshape(-1), group=list(self.ranks))
        out.reshape(-1)[...] = simulated_cupy.asarray(gathered)

    def reduce_scatter(self, x, out, op="sum", dtype=None):
        piece = self.host.reduce_scatter(x.get().reshape(-1), op=op, group=list(self.ranks))
        out.reshape(-1)[...] = simulated_cupy.asarray(piece)

    def broadcast(self, x, src, dtype=None):
        value = x.get()
        self.host.broadcast(value, src=src, group=list(self.ranks))
        x[...] = simulated_cupy.asarray(value)

    def group(self):
        import contextlib

        @contextlib.contextmanager
        def grouped():
            self.pending = ({}, {})
            yield self
            sends, recvs = self.pending
            # a rank with nothing to send sends nothing of the dtype it receives (row sizes count bytes)
            dt = next(iter(recvs.values())).dtype if recvs else np.float32
            flat = np.concatenate([sends[r] for r in self.ranks if r in sends] or [np.empty(0, dt)])
            got = self.host.all_to_all(flat, [sends[r].size if r in sends else 0 for r in self.ranks],
                                       group=list(self.ranks),
                                       recv_sizes=[recvs[r].size if r in recvs else 0 for r in self.ranks])
            at = 0
            for r in self.ranks:
                if r in recvs:
                    recvs[r][...] = simulated_cupy.asarray(got[at:at + recvs[r].size])
                    at += recvs[r].size
        return grouped()

    def send(self, x, peer, sync=True, dtype=None):
        self.pending[0][peer] = x.get()

    def recv(self, x, peer, sync=True, dtype=None):
        self.pending[1][peer] = x

    def wait(self, stream=None, what="collective"):
        pass


def _through_ipc_twin(fn, *args):
    """fn(*args) with the IPC transport, on ipc_allreduce's host twin of the device operations."""
    from globaltensor.distributed import device_collectives, ipc_allreduce
    device_collectives.transport = lambda ranks: "ipc"
    ipc_allreduce.CudaDevice = ipc_allreduce.HostDevice
    return fn(*args)


def _through_nccl_twin(fn, *args):
    from globaltensor.distributed import device_collectives
    device_collectives.transport = lambda ranks: "nccl"
    device_collectives._nccl = HostNccl
    return fn(*args)


@pytest.mark.parametrize("twin", [_through_ipc_twin, _through_nccl_twin], ids=["ipc", "nccl"])
def test_every_op_through_the_gpu_transports(twin):
    """Every op on 2 ranks with boxing on the IPC or NCCL transport (their host twins)."""
    import test_every_op as spec
    env = {**SIMULATED, "GLOBALTENSOR_IPC_MAX_BYTES": "0"}
    spec.compare_with_one_process(run_ranks(twin, 2, spec._all_specs, False, "cuda", timeout=600, env=env)[0])
    assert run_ranks(twin, 3, _every_pair, False, env=env)[0] == 16
    assert run_ranks(twin, 4, _every_pair, True, env=env)[0] == 256
