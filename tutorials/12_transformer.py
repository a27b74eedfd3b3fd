# %% [markdown]
# # 12 · A transformer on a 2x2 mesh
#
# `examples/gpt.py` is a small GPT: token and position embeddings, pre-norm
# `nn.TransformerEncoderLayer` blocks with causal attention (`nn.MultiHeadAttention` over
# `nn.functional.scaled_dot_product_attention`), a final LayerNorm and a linear head over the
# vocabulary, trained on the characters of a tiny corpus the repository ships. Nothing in the
# model names a layout. The layouts are chosen outside, by converting parameters
# (`lay_out` in the example):
#
# | parameter | data parallel (`dp`) | Megatron tensor parallel (`tp`, on the TP mesh axis) |
# |---|---|---|
# | everything | broadcast | broadcast, then: |
# | token embedding `[vocab, d]`, head `[vocab, d]` | | `S(0)`: the vocabulary split (logits split by vocabulary) |
# | q/k/v projections, first feed-forward Linear | | `S(0)` rows: whole heads, a slice of the hidden features |
# | attention output, second feed-forward Linear | | `S(1)` columns: partial sums, reduced where needed |
# | a batch | `S(0)` | `B` |
#
# On a 2x2 mesh, axis 0 is data parallel and axis 1 tensor parallel: a parameter is `(B, x)` with
# `x` its TP split, a batch `(S(0), B)`. The dispatcher inserts every collective; the losses are the
# one-process run's. `lay_out` also fixes Megatron's two reduction points with forward hooks:
# `nn.tensor_parallel.reduce_output(out_proj)` (g: the row-parallel layer's partial sum reduced at
# once, so the residual stream stays whole) and `nn.tensor_parallel.reduce_input_grad(self_attn)`
# (f: the gradient of the column-parallel layers' input reduced where it re-enters the stream).
# A step then issues Megatron's collectives, one all_reduce per sublayer forward and one backward;
# the loss over the split vocabulary moves no logits (only a few values per token).

# %%
import importlib.util
import os

import numpy as np

from globaltensor import distributed as dist

# the tutorial's folder: beside this file when run as a script, the working folder in a notebook
HERE = os.path.dirname(os.path.abspath(__file__)) if "__file__" in globals() else os.getcwd()
GPT = os.path.join(HERE, "..", "examples", "gpt.py")


def train(layout, steps=8):
    spec = importlib.util.spec_from_file_location("gpt", GPT)
    gpt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpt)
    return gpt.train(layout, steps=steps, quiet=True)


alone = dist.spawn(train, args=("local",), nprocs=1)[0]
mesh = dist.spawn(train, args=("2d",), nprocs=4)[0]
print("one process:", np.round(alone, 5))
print("2x2 mesh:   ", np.round(mesh, 5))
assert np.allclose(mesh, alone, rtol=2e-5) and alone[-1] < alone[0]

# %% [markdown]
# ## What each rank holds
#
# The layouts after `lay_out`, and the piece of each parameter a rank holds: rank 0 has half of
# every tensor-parallel weight (the other half is on rank 1, its partner on mesh axis 1) and the
# same pieces as rank 2 (its partner on the data-parallel axis 0).

# %%
def pieces():
    spec = importlib.util.spec_from_file_location("gpt", GPT)
    gpt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpt)
    import globaltensor as gt
    model = gpt.GPT(vocab=48)
    gpt.lay_out(model, gt.placement("cpu", [[0, 1], [2, 3]]), "2d")
    names = ["tok.weight", "blocks.layers.0.self_attn.q_proj.weight", "blocks.layers.0.self_attn.out_proj.weight",
             "blocks.layers.0.linear1.weight", "blocks.layers.0.linear2.weight", "blocks.layers.0.norm1.weight",
             "head.weight"]
    params = dict(model.named_parameters())
    return [(n, tuple(params[n].shape), "(" + ", ".join(str(s) for s in params[n].sbp) + ")",
             tuple(params[n].to_local().shape)) for n in names]


for name, shape, sbp, piece in dist.spawn(pieces, nprocs=4)[0]:
    print(f"{name:45} global {str(shape):11} sbp {sbp:10} rank 0 holds {piece}")

# %% [markdown]
# Inside a block, attention needs no communication at all: `split_heads` turns features split over
# the TP axis into heads split over it, and every op of attention keeps batch and heads split alike.
# `docs/transformer_layouts.md` follows one block step by step, with the SBP of every activation and
# the collectives each step runs.
