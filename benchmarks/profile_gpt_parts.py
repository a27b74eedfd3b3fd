"""The bench GPT's parts, forward and backward, ours against torch's (issue 35): one transformer
block, its attention and feed-forward halves, and the ops inside them, at one DP rank's shapes
(batch 4, sequence 128, d_model 256, 8 heads), local tensors, one thread, in one process; each
part's two sides alternated call by call, so a machine whose speed drifts moves both alike.

    python benchmarks/profile_gpt_parts.py [--calls 60] [--parts block,gelu,...]

A part's time is one call of `part().sum().backward()` (thread CPU, median of --calls); "sum only"
is that harness around a leaf, for scale.
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads OpenBLAS: one thread, as in a rank
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import cpu_name, print_table  # noqa: E402
from bench_models import GPT_CFG, torch_gpt_model  # noqa: E402


def _inputs():
    import numpy as np
    rng = np.random.default_rng(0)
    d, s, h = GPT_CFG["d_model"], GPT_CFG["seq"], GPT_CFG["heads"]
    return (rng.standard_normal((4, s, d), dtype=np.float32), rng.standard_normal((4, s, 4 * d), dtype=np.float32),
            [rng.standard_normal((4, h, s, d // h), dtype=np.float32) for _ in range(3)])


def ours_parts(x_np, h_np, qkv_np):
    import globaltensor as gt
    F = gt.nn.functional
    d = GPT_CFG["d_model"]
    gt.manual_seed(0)
    blk = gt.nn.TransformerEncoderLayer(d, GPT_CFG["heads"], 4 * d, 0.0, activation="gelu", batch_first=True,
                                        norm_first=True)
    x, h = (gt.tensor(a).requires_grad_() for a in (x_np, h_np))
    q, k, v = (gt.tensor(a).requires_grad_() for a in qkv_np)
    return {"block": lambda: blk(x, is_causal=True),
            "attention half": lambda: x + blk._sa(blk.norm1(x), None, True),
            "feed-forward half": lambda: x + blk._ff(blk.norm2(x)),
            "multi-head attention": lambda: blk.self_attn(x, is_causal=True),
            "sdpa causal": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            "linear 256->1024": lambda: blk.linear1(x),
            "gelu": lambda: F.gelu(h),
            "layer_norm": lambda: blk.norm1(x),
            "add": lambda: x + x,
            "sum only": lambda: x}


def torch_parts(x_np, h_np, qkv_np):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    torch.manual_seed(0)
    blk = torch_gpt_model(dict(GPT_CFG, layers=1)).blocks[0]
    x, h = (torch.from_numpy(a.copy()).requires_grad_() for a in (x_np, h_np))
    q, k, v = (torch.from_numpy(a.copy()).requires_grad_() for a in qkv_np)

    def mha(t):
        b, n, _ = t.shape
        heads = lambda u: u.view(b, n, blk.h, blk.hd).transpose(1, 2)  # noqa: E731
        a = F.scaled_dot_product_attention(heads(blk.q(t)), heads(blk.k(t)), heads(blk.v(t)), is_causal=True)
        return blk.o(a.transpose(1, 2).reshape(b, n, -1))
    return {"block": lambda: blk(x),
            "attention half": lambda: x + mha(blk.ln1(x)),
            "feed-forward half": lambda: x + blk.fc2(F.gelu(blk.fc1(blk.ln2(x)))),
            "multi-head attention": lambda: mha(x),
            "sdpa causal": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            "linear 256->1024": lambda: blk.fc1(x),
            "gelu": lambda: F.gelu(h),
            "layer_norm": lambda: blk.ln1(x),
            "add": lambda: x + x,
            "sum only": lambda: x}


def _call(part):
    part().sum().backward()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=60)
    p.add_argument("--parts", default=None, help="comma-separated names (default: all)")
    args = p.parse_args()
    inputs = _inputs()
    ours, theirs = ours_parts(*inputs), torch_parts(*inputs)
    rows = []
    for name in (args.parts.split(",") if args.parts else ours):
        a, b = [], []
        for i in range(args.calls + 2):  # two warm-up calls a side
            for side, out in ((ours[name], a), (theirs[name], b)):
                t = time.thread_time()
                _call(side)
                if i >= 2:
                    out.append(time.thread_time() - t)
        a, b = 1e3 * statistics.median(a), 1e3 * statistics.median(b)
        rows.append([name, f"{a:.3f}", f"{b:.3f}", f"{a / b:.2f}"])
    print_table(f"the GPT's parts, forward + backward, one DP rank's shapes ({cpu_name()})",
                ["part", "ours ms", "torch ms", "ours / torch"], rows)


if __name__ == "__main__":
    main()
