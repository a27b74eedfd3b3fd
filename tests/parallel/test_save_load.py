"""save/load as OneFlow and PyTorch document them: one file of any picklable object (a whole
module too), buffers, map_location, external data, PyTorch's .pt state dicts, and a global
tensor saved without global_dst_rank raising on every rank."""
import io
import os

import numpy as np
import pytest

import globaltensor as gt
from conftest import run_ranks


class Note:  # any picklable object rides along
    def __init__(self, text):
        self.text = text


def test_a_whole_module_and_any_object_in_one_file(tmp_path):
    gt.manual_seed(0)
    model = gt.nn.Sequential(gt.nn.Linear(4, 3), gt.nn.ReLU(), gt.nn.Linear(3, 2))
    path = str(tmp_path / "model.pt")
    gt.save({"model": model, "note": Note("step 7"), "array": np.arange(3), "lr": 0.1}, path)
    assert os.path.isfile(path) and os.listdir(tmp_path) == ["model.pt"]  # a file, no temporary left
    back = gt.load(path)
    x = gt.randn(5, 4)
    np.testing.assert_array_equal(back["model"](x).numpy(), model(x).numpy())
    assert isinstance(back["model"][0].weight, gt.nn.Parameter) and back["model"][0].weight.requires_grad
    assert back["note"].text == "step 7" and back["lr"] == 0.1
    np.testing.assert_array_equal(back["array"], np.arange(3))


def test_buffers_map_location_and_external_data(tmp_path):
    state = {"w": gt.tensor([[1.0, 2.0]]), "b": gt.tensor([3], dtype=gt.int64), "h": gt.ones(2, dtype=gt.bfloat16)}
    buffer = io.BytesIO()
    gt.save(state, buffer)
    buffer.seek(0)
    back = gt.load(buffer, map_location="cpu")
    assert [str(back[k].dtype) for k in "wbh"] == [str(state[k].dtype) for k in "wbh"]
    np.testing.assert_array_equal(back["w"].numpy(), [[1.0, 2.0]])
    folder = str(tmp_path / "ck")
    gt.save(state, folder, save_as_external_data=True)
    assert sorted(os.listdir(folder)) == ["pickled_data", "tensor_0.npy", "tensor_1.npy", "tensor_2.npy"]
    np.testing.assert_array_equal(gt.load(folder)["h"].numpy().astype(np.float32), [1.0, 1.0])
    seen = []
    gt.load(folder, map_location=lambda t, where: seen.append(where) or t)
    assert seen == ["cpu"] * 3


def test_a_pytorch_state_dict_loads_into_a_model(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    theirs = torch.nn.Linear(4, 3)
    path = str(tmp_path / "linear.pt")
    torch.save(theirs.state_dict(), path)
    ours = gt.nn.Linear(4, 3)
    ours.load_state_dict(gt.load(path))
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(ours(gt.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-6)


def _global_save(path):
    p = gt.placement("cpu", [0, 1])
    w = gt.tensor(np.arange(6.0).reshape(3, 2), placement=p, sbp=gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0))
    with pytest.raises(AssertionError, match="global_dst_rank"):  # as OneFlow's assert, on every rank
        gt.save({"w": w}, path)
    gt.save({"w": w}, path, global_dst_rank=0)
    local = gt.load(path)["w"]
    placed = gt.load(path, global_src_rank=1, map_location=p)["w"]
    return local.is_local, local.numpy(), placed.is_global, str(placed.sbp[0]), placed.numpy()


def test_global_tensors_need_global_dst_rank_and_load_anywhere(tmp_path):
    for is_local, value, is_global, sbp, placed in run_ranks(_global_save, 2, str(tmp_path / "w.pt")):
        assert is_local and is_global and sbp == "B"
        np.testing.assert_array_equal(value, np.arange(6.0).reshape(3, 2))
        np.testing.assert_array_equal(placed, np.arange(6.0).reshape(3, 2))


def test_a_directory_checkpoint_of_earlier_versions_still_loads(tmp_path):
    from globaltensor.serialization import save_dir
    save_dir({"w": gt.tensor([1.0, 2.0])}, str(tmp_path / "old"))
    assert gt.load(str(tmp_path / "old"))["w"].numpy().tolist() == [1.0, 2.0]


def _legacy_from_rank_1(path):
    return gt.load(path, global_src_rank=1)["w"].numpy().tolist()


def test_a_directory_checkpoint_read_on_one_rank_reaches_every_rank(tmp_path):
    from globaltensor.serialization import save_dir
    path = str(tmp_path / "old")
    save_dir({"w": gt.tensor([1.0, 2.0])}, path)
    for _ in range(3):  # every rank decides alike, run after run
        assert run_ranks(_legacy_from_rank_1, 2, path) == [[1.0, 2.0], [1.0, 2.0]]
