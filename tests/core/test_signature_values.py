"""An op's chosen SBP signature is a value that prints as the rules write it (S(1), S(0) -> P)."""
import numpy as np

import globaltensor as gt
from conftest import run_ranks
from globaltensor.sbp import Signature, broadcast, partial_sum, split


def test_signature_prints_as_rules_write_it():
    assert str(Signature((split(1), split(0)), (partial_sum,))) == "S(1), S(0) -> P"
    two_d = Signature(((split(0), broadcast), (broadcast, split(1))), ((split(0), split(1)),))
    assert str(two_d) == "(S(0), B), (B, S(1)) -> (S(0), S(1))"
    assert repr(two_d) == "Signature((S(0), B), (B, S(1)) -> (S(0), S(1)))"
    ins, outs = two_d  # a pair, as a rule's row
    assert two_d.inputs == ins and two_d.outputs == outs == ((split(0), split(1)),)


def _chosen():
    p = gt.placement("cpu", [0, 1])
    x = gt.tensor(np.arange(12.0).reshape(3, 4)).to_global(p, broadcast).to_global(sbp=split(1))
    w = gt.tensor(np.arange(8.0).reshape(4, 2)).to_global(p, broadcast).to_global(sbp=split(0))
    sig = gt.debug.signature("matmul", x, w)
    with gt.debug.count_collectives() as c:
        y = x @ w
    return str(sig), dict(c), str(y.sbp[0]), y.numpy()


def test_matmul_of_split_contraction_dims_is_partial_without_a_collective():
    for sig, counts, out_sbp, value in run_ranks(_chosen, 2):
        assert sig == "S(1), S(0) -> P" and out_sbp == "P"
        assert counts == {}
        np.testing.assert_array_equal(value, np.arange(12.0).reshape(3, 4) @ np.arange(8.0).reshape(4, 2))
