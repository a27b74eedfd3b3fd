"""The SBP of every activation through one transformer block (pre-norm) on a 2x2 mesh: the batch
split over mesh axis 0 (data parallel), heads and feed-forward split over axis 1 (Megatron).

    python -m globaltensor.distributed.launch --nproc_per_node 4 examples/transformer_layouts.py

Prints a markdown table (docs/transformer_layouts.md holds its output): each step, the SBP of its
result, and the collectives it ran (gt.debug.count_collectives).
"""
import globaltensor as gt
import globaltensor.nn as nn
from globaltensor import ops

B, P, S0, S1 = gt.sbp.broadcast, gt.sbp.partial_sum, gt.sbp.split(0), gt.sbp.split(1)


def megatron_block(mesh, d_model=16, heads=4, hooks=False):
    gt.manual_seed(0)
    blk = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, 0.0, activation="gelu", batch_first=True,
                                     norm_first=True).to_global(mesh, (B, B))
    attn = blk.self_attn
    for lin in (attn.q_proj, attn.k_proj, attn.v_proj, blk.linear1):  # column parallel: weight rows split
        lin.weight = nn.Parameter(lin.weight.to_global(sbp=(B, S0)))
        lin.bias = nn.Parameter(lin.bias.to_global(sbp=(B, S0)))
    for lin in (attn.out_proj, blk.linear2):  # row parallel: weight columns split, output partial
        lin.weight = nn.Parameter(lin.weight.to_global(sbp=(B, S1)))
        if hooks:  # Megatron's g (and f on the inputs, which acts in backward only)
            nn.tensor_parallel.reduce_output(lin)
    if hooks:
        nn.tensor_parallel.reduce_input_grad(attn)
        nn.tensor_parallel.reduce_input_grad(blk.linear1)
    return blk


def text(sbp):
    return "(" + ", ".join(str(s) for s in sbp) + ")"


def table(mesh, hooks):
    blk = megatron_block(mesh, hooks=hooks)
    attn = blk.self_attn
    x = gt.randn(8, 12, 16).to_global(mesh, (B, B)).to_global(sbp=(S0, B))
    rows = []

    def step(name, fn, *args):
        with gt.debug.count_collectives() as counted:
            out = fn(*args)
        rows.append((name, tuple(out.shape), text(out.sbp), ", ".join(f"{k} x{v}" for k, v in sorted(counted.items()))
                     or "none"))
        return out

    h = step("norm1(x)", blk.norm1, x)
    q = step("q = split_heads(q_proj(h))", lambda t: ops.split_heads(attn.q_proj(t), attn.num_heads), h)
    k = step("k = split_heads(k_proj(h))", lambda t: ops.split_heads(attn.k_proj(t), attn.num_heads), h)
    v = step("v = split_heads(v_proj(h))", lambda t: ops.split_heads(attn.v_proj(t), attn.num_heads), h)
    a = step("attention(q, k, v), causal", lambda *t: nn.functional.scaled_dot_product_attention(*t, is_causal=True),
             q, k, v)
    m = step("merge_heads", ops.merge_heads, a)
    o = step("out_proj (row parallel)", attn.out_proj, m)
    x = step("x + attention", lambda s, t: s + t, x, o)
    h = step("norm2(x)", blk.norm2, x)
    f = step("gelu(linear1(h)) (column parallel)", lambda t: blk.activation(blk.linear1(t)), h)
    g = step("linear2 (row parallel)", blk.linear2, f)
    step("x + feed-forward", lambda s, t: s + t, x, g)
    return rows


def main():
    mesh = gt.placement("cpu", [[0, 1], [2, 3]])
    for title, hooks in (("Eager mode's choice, op by op", False),
                         ("With Megatron's f and g (nn.tensor_parallel hooks)", True)):
        rows = table(mesh, hooks)
        if gt.env.get_rank() == 0:
            print(f"\n{title}:\n")
            print("| step | global shape | SBP (axis 0: data, axis 1: tensor) | collectives on this rank |")
            print("|---|---|---|---|")
            for name, shape, sbp, coll in rows:
                print(f"| {name} | {shape} | {sbp} | {coll} |")


if __name__ == "__main__":
    main()
