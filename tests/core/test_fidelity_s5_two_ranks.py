"""On 2 ranks, one spawn: x[mask] = v in nn.Graph (OneFlow's lazy bool_indices), to_global's size check (issue 28)."""
import numpy as np
import pytest

import globaltensor as gt
from conftest import run_ranks

MASK = [True, False, True, True, False, False, False, True]


def _graph_mask_fill(sbp_name):
    sbp = {"B": gt.sbp.broadcast, "S0": gt.sbp.split(0)}[sbp_name]
    placement = gt.placement("cpu", [0, 1])
    v = gt.arange(1, 9, dtype=gt.float32).to_global(placement, gt.sbp.broadcast).to_global(sbp=sbp)
    mask = gt.tensor(MASK, dtype=gt.bool).to_global(placement, gt.sbp.broadcast).to_global(sbp=sbp)

    class Fill(gt.nn.Graph):
        def build(self, x):
            y = x * 1
            y[mask] = 6.6  # the mask: a global tensor made before the graph, read as state
            return y

    g = Fill()
    with gt.debug.count_collectives() as counted:
        first = g(v)
    again = g(v + 1)  # replayed
    return first.numpy(), again.numpy(), first.sbp == v.sbp, dict(counted), _unbalanced_pieces(placement), \
        _shared_pieces(placement)


def _shared_pieces(placement):
    """A split tensor's .data and detach() share each rank's piece: writes through them change it."""
    x = gt.arange(8, dtype=gt.float32).to_global(placement, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0))
    ptr = x.data_ptr()
    x.data.mul_(3)
    x.detach()[0] = -1.0  # the first element of the global value, on rank 0's piece
    return x.numpy().tolist(), x.data_ptr() == ptr


def _unbalanced_pieces(placement):
    """OneFlow's test_local_to_global_with_invalid_size, second half: pieces that differ along a dim
    that is not split raise RuntimeError (and ValueError, SPEC's class) on every rank."""
    x = gt.ones(2, 4) if gt.env.get_rank() == 0 else gt.ones(4, 4)
    try:
        x.to_global(placement=placement, sbp=gt.sbp.split(1))
    except RuntimeError as exc:
        return isinstance(exc, ValueError), str(exc)
    return None


@pytest.mark.parametrize("sbp_name", ["S0"])
def test_bool_mask_assignment_in_a_graph_matches_torch_and_piece_sizes_are_checked(sbp_name):
    torch = pytest.importorskip("torch")
    want = torch.arange(1, 9, dtype=torch.float32)
    want[torch.tensor(MASK)] = 6.6
    want_again = torch.arange(2, 10, dtype=torch.float32)
    want_again[torch.tensor(MASK)] = 6.6
    for first, again, same_sbp, counted, raised, shared in run_ranks(_graph_mask_fill, 2, sbp_name, timeout=90):
        assert shared == ([-1.0] + [3.0 * i for i in range(1, 8)], True)
        assert raised is not None and raised[0]
        assert raised[1].startswith("Sizes of tensors must match except in dimension 1. Expected size 2 but got size 4 "
                                    "for tensor on rank 1!")
        np.testing.assert_allclose(first, want.numpy(), rtol=0, atol=0)
        np.testing.assert_allclose(again, want_again.numpy(), rtol=0, atol=0)
        assert same_sbp and not counted  # a split x and mask: each rank fills its own rows
