"""flow.utils.global_view (to_global/to_local over nested containers, global_mode) as OneFlow's, on 1 and 2 ranks."""
import collections
import threading

import numpy as np
import pytest

import globaltensor as gt
from conftest import run_ranks
from globaltensor.utils import global_view


def test_names_as_oneflow():
    assert set(global_view.__all__) == {"to_global", "to_local", "global_mode", "current_global_mode"}
    assert gt.utils.global_view.to_global is global_view.to_global


def test_global_mode_is_scoped_to_the_context():
    pl = gt.placement("cpu", [0])
    assert not global_view.current_global_mode().is_enabled
    with pytest.raises(ValueError, match="placement and sbp"):
        global_view.global_mode(True, placement=pl)
    seen = []
    with global_view.global_mode(True, placement=pl, sbp=gt.sbp.broadcast):
        mode = global_view.current_global_mode()
        assert mode.is_enabled and mode.placement == pl and mode.sbp == (gt.sbp.broadcast,)
        x = gt.randn(2, 3, device="cpu")  # the OneFlow docs' spelling: device= gives way to the mode
        assert x.is_global and x.placement == pl and x.device == "cpu"
        assert gt.ones(2, placement=gt.placement("cpu", [0]), sbp=gt.sbp.split(0)).sbp == (gt.sbp.split(0),)
        with global_view.global_mode(False):
            assert gt.zeros(2).is_local and not global_view.current_global_mode().is_enabled
        worker = threading.Thread(target=lambda: seen.append(gt.zeros(1).is_local))
        worker.start()
        worker.join()
    assert seen == [True] and gt.arange(3).is_local and not global_view.current_global_mode().is_enabled
    with pytest.raises(RuntimeError, match="global tensors"):
        x.device


def test_containers_keep_their_types_and_leaves():
    pl = gt.placement("cpu", [0])
    Pair = collections.namedtuple("Pair", "a b")
    tree = collections.OrderedDict(w=gt.ones(2), rest=[Pair(gt.zeros(1), 3), (gt.ones(1), "s")])
    with pytest.warns(UserWarning, match="Non-Tensor type"):
        out = global_view.to_global(tree, pl, gt.sbp.broadcast)
    assert type(out) is collections.OrderedDict and type(out["rest"][0]) is Pair and out["rest"][0].b == 3
    assert out["w"].is_global and out["rest"][1][0].is_global and out["rest"][1][1] == "s"
    back = global_view.to_local(out["w"], copy=True)
    assert back.is_local and np.array_equal(back.numpy(), [1, 1])
    with pytest.warns(UserWarning, match="should be global"):
        assert global_view.to_local(back) is back
    model = global_view.to_global(gt.nn.Linear(2, 2), pl, gt.sbp.broadcast)
    assert model.weight.is_global


def _on_two_ranks():
    rank = gt.env.get_rank()
    both, first = gt.placement("cpu", [0, 1]), gt.placement("cpu", [0])
    gt.manual_seed(rank)  # each rank's own local model: broadcast takes rank 0's values
    sd = gt.nn.Sequential(gt.nn.Linear(4, 2), gt.nn.ReLU(), gt.nn.Linear(2, 2)).state_dict()
    mine = {k: v.numpy() for k, v in sd.items()}
    per = global_view.to_global(sd, both, lambda tree, t: gt.sbp.split(0) if t.ndim == 2 else gt.sbp.broadcast)
    bcast = global_view.to_global(sd, both, gt.sbp.broadcast)
    local = global_view.to_local(per)
    # a placement that leaves rank 1 out: rank 1 takes rank 0's structure, whatever it passed
    only = global_view.to_global(sd if rank == 0 else {"ignored": gt.ones(1)}, first, gt.sbp.broadcast)
    with global_view.global_mode(True, placement=both, sbp=gt.sbp.split(0)):
        gt.manual_seed(7)
        drawn = gt.randn(6, 3)
        where = (drawn.is_global, drawn.sbp, str(drawn.device))
    return (mine, {k: v.numpy() for k, v in per.items()}, {k: v.numpy() for k, v in bcast.items()},
            {k: v.numpy() for k, v in local.items()}, sorted(only), {k: v.numpy() for k, v in only.items()},
            drawn.numpy(), where)


def test_state_dicts_and_global_mode_on_two_ranks():
    r0, r1 = run_ranks(_on_two_ranks, 2, timeout=120)
    for mine, per, bcast, local, keys, only, drawn, where in (r0, r1):
        for k, v in r0[0].items():
            if v.ndim == 2:  # split(0): the ranks' pieces concatenate
                assert np.array_equal(per[k], np.concatenate([r0[0][k], r1[0][k]]))
            else:  # broadcast: rank 0's values
                assert np.array_equal(per[k], v)
            assert np.array_equal(bcast[k], v) and np.array_equal(only[k], v)
            assert np.array_equal(local[k], mine[k] if v.ndim == 2 else v)  # to_local: this rank's piece
        assert keys == sorted(r0[0])
        gt.manual_seed(7)
        assert np.array_equal(drawn, gt.randn(6, 3).numpy())  # same values as one process
        assert where == (True, (gt.sbp.split(0),), "cpu:0")  # str as OneFlow prints a device
