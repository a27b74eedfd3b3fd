"""The public API is typed (as DTensor's): every public function and method of the typed modules
has annotated parameters and return, and the annotations resolve (typing.get_type_hints)."""
import inspect
import typing

import pytest

import globaltensor as gt
from globaltensor import autograd, sbp
from globaltensor.distributed import collectives
from globaltensor.ops import conversion
from globaltensor.ps import checkpoint as ps_checkpoint, partition as ps_partition, tables as ps_tables
from globaltensor.ps.init import seeded_rows

TYPED = {
    "Tensor": [gt.Tensor.__init__, gt.Tensor.layout, gt.Tensor.dim, gt.Tensor.size, gt.Tensor.numel,
               gt.Tensor.to_local, gt.Tensor.item, gt.Tensor.tolist, gt.Tensor.detach, gt.Tensor.requires_grad_,
               gt.Tensor.to_global, gt.Tensor.numpy, gt.Tensor.to, gt.Tensor.cpu, gt.Tensor.cuda,
               gt.Tensor.contiguous, gt.Tensor.backward, gt.Tensor.device.fget],
    "placement": [getattr(gt.placement, n) for n in ("__init__", "rank_list", "mesh_coord", "axis_ranks",
                                                      "axes_ranks", "__getitem__")] + [gt.placement.all],
    "sbp": [sbp.split.__init__, sbp.normalize, sbp.without_partial, sbp.reducible_axes, sbp.Signature.__new__],
    "autograd": [autograd.backward, autograd.grad, autograd.no_grad, autograd.enable_grad, autograd.is_grad_enabled,
                 autograd.set_grad_enabled.__init__, autograd.seeds_ones, autograd.Function.apply,
                 autograd.FunctionCtx.save_for_backward],
    "conversion": [conversion.to_global],
    "collectives": [getattr(collectives, n) for n in ("empty_shared", "barrier", "all_reduce", "all_reduce_async",
                                                       "broadcast", "all_gather", "reduce_scatter", "all_to_all",
                                                       "send", "recv")],
    "comm": [getattr(gt.comm, n) for n in gt.comm.__all__],
    "surface": [gt.device.__init__, gt.device.__eq__, gt.Size.numel, gt.Tensor.__new__, gt.Tensor.retain_grad,
                gt.Tensor.data.fget, gt.Tensor.data.fset, gt.Tensor.global_id, gt.Tensor.new_zeros, gt.Tensor.new_ones,
                gt.Tensor.new_empty, gt.Tensor.new_full, gt.Tensor.new_tensor, gt.Tensor.is_cuda.fget],
    "factories": [getattr(gt, n) for n in ("tensor", "zeros", "ones", "full", "empty", "arange", "linspace", "eye",
                                           "zeros_like", "ones_like", "full_like", "empty_like", "rand", "randn",
                                           "randint", "normal", "uniform")],
    "ps tables": [ps_partition.dense_blocks, ps_partition.job_blocks, ps_partition.server_blocks,
                  ps_partition.server_of_ids, seeded_rows, ps_checkpoint.save_server, ps_checkpoint.load_server,
                  ps_checkpoint.load_dense] + [getattr(ps_tables.DenseBlock, n) for n in (
                      "__init__", "apply", "add", "state", "load_state")] + [getattr(ps_tables.SparseTable, n) for n in (
                      "__init__", "pull", "push", "add", "state", "load_state")],
}


@pytest.mark.parametrize("group", sorted(TYPED))
def test_public_api_is_annotated_and_resolves(group):
    missing = []
    for fn in TYPED[group]:
        hints = typing.get_type_hints(fn)  # raises on an annotation that does not resolve
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.name not in ("self", "cls", "ctx") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        lacking = [p.name for p in params if p.name not in hints]
        if lacking or "return" not in hints:
            missing.append(f"{fn.__qualname__}: {lacking + ([] if 'return' in hints else ['return'])}")
    assert not missing, "unannotated: " + "; ".join(missing)
