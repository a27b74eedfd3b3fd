"""A small GPT (decoder-only transformer) trained on a tiny corpus, on any layout.

    python examples/gpt.py                                                           # one process
    python -m globaltensor.distributed.launch --nproc_per_node 2 examples/gpt.py --layout dp
    python -m globaltensor.distributed.launch --nproc_per_node 2 examples/gpt.py --layout tp
    python -m globaltensor.distributed.launch --nproc_per_node 4 examples/gpt.py --layout 2d
    python -m globaltensor.distributed.launch --nproc_per_node 2 examples/gpt.py --layout pp

Characters of examples/data/tiny_corpus.txt are the tokens. dp: the batch split over the ranks,
parameters broadcast. tp: Megatron's tensor parallelism as layouts: the token embedding and the
output head split by vocabulary (the loss over the split vocabulary without gathering logits),
attention split by heads (q/k/v by rows, the output projection by columns), the feed-forward's
first Linear by rows and its second by columns. 2d: a 2x2 mesh, the batch over axis 0 and tp over
axis 1. pp: 2 pipeline stages (gt.pipeline.Pipeline, schedule 1F1B, 4 micro-batches), stage 0
on rank 0 (the embeddings and the first half of the blocks), stage 1 on rank 1 (the other blocks,
the final LayerNorm and the head); `stages(model)` cuts the GPT into stage modules that share its
submodules. Every layout prints the same losses (to float32 rounding).
"""
import argparse
import os

import numpy as np

import globaltensor as gt
import globaltensor.nn as nn

B, S0, S1 = gt.sbp.broadcast, gt.sbp.split(0), gt.sbp.split(1)
CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "tiny_corpus.txt")


class GPT(nn.Module):
    """Token and position embeddings, pre-norm transformer blocks with causal attention, a final
    LayerNorm and a linear head over the vocabulary."""

    def __init__(self, vocab, d_model=64, heads=4, layers=2, seq=32, dropout=0.0):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq, d_model)
        block = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(block, layers, norm=nn.LayerNorm(d_model))
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx):
        return self.head(self.blocks(embed(self.tok, self.pos, idx), is_causal=True))


def embed(tok, pos, idx):
    """Token plus position embeddings of a (batch, seq) tensor of token ids."""
    where = {} if idx.is_local else {"placement": idx.placement, "sbp": (B,) * idx.placement.ndim}
    return tok(idx) + pos(gt.arange(idx.shape[1], **where))


class Stage(nn.Module):
    """A pipeline stage of a GPT, sharing the GPT's modules: the embeddings (first stage), a run
    of transformer blocks, then the final LayerNorm and the head (last stage)."""

    def __init__(self, model, blocks, first, last):
        super().__init__()
        if first:
            self.tok, self.pos = model.tok, model.pos
        self.layers = nn.ModuleList(blocks)
        if last:
            self.norm, self.head = model.blocks.norm, model.head
        self.first, self.last = first, last

    def forward(self, x):
        if self.first:
            x = embed(self.tok, self.pos, x)
        for layer in self.layers:
            x = layer(x, is_causal=True)
        return self.head(self.norm(x)) if self.last else x


def stages(model, n=2):
    """The GPT cut into n pipeline stages, the blocks shared out as evenly as can be (earlier
    stages take the extra ones); the stages' parameters are the model's own."""
    layers = list(model.blocks.layers)
    bounds = [len(layers) * i // n for i in range(n + 1)]
    return [Stage(model, layers[bounds[i]:bounds[i + 1]], i == 0, i == n - 1) for i in range(n)]


def lay_out(model, mesh, layout):
    """Parameters on the mesh: broadcast, then Megatron's splits on the tensor-parallel axis
    (the mesh's last axis for tp and 2d). Returns the SBP of a batch."""
    model.to_global(mesh, (B,) * mesh.ndim)
    if layout == "dp":
        return (S0,)
    lead = (B,) * (mesh.ndim - 1)  # the data-parallel axis of a 2x2 mesh keeps parameters whole

    def split(module, name, sbp):
        setattr(module, name, nn.Parameter(getattr(module, name).to_global(sbp=lead + (sbp,))))

    split(model.tok, "weight", S0)  # vocabulary rows
    split(model.head, "weight", S0)  # vocabulary rows: logits split by vocabulary
    for blk in model.blocks.layers:
        for lin in (blk.self_attn.q_proj, blk.self_attn.k_proj, blk.self_attn.v_proj, blk.linear1):
            split(lin, "weight", S0)
            split(lin, "bias", S0)
        split(blk.self_attn.out_proj, "weight", S1)
        split(blk.linear2, "weight", S1)
        nn.tensor_parallel.reduce_input_grad(blk.self_attn)  # Megatron's f and g: one all_reduce per
        nn.tensor_parallel.reduce_input_grad(blk.linear1)  # sublayer forward and one backward
        nn.tensor_parallel.reduce_output(blk.self_attn.out_proj)
        nn.tensor_parallel.reduce_output(blk.linear2)
    nn.tensor_parallel.reduce_output(model.tok)  # the vocabulary-split lookup is partial too
    nn.tensor_parallel.reduce_input_grad(model.head)
    return (S0, B) if layout == "2d" else (B,)


def batches(text, vocab_index, batch, seq, steps, seed=0):
    """(inputs, targets) windows of the corpus, the same for every layout."""
    ids = np.array([vocab_index[c] for c in text], np.int64)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        starts = rng.integers(0, len(ids) - seq - 1, batch)
        x = np.stack([ids[s:s + seq] for s in starts])
        y = np.stack([ids[s + 1:s + seq + 1] for s in starts])
        yield x, y


def train(layout="local", steps=30, batch=8, seq=32, d_model=64, heads=4, layers=2, lr=3e-3, quiet=False,
          micro_batches=4, device="cpu"):
    text = open(CORPUS).read()
    chars = sorted(set(text))
    vocab_index = {c: i for i, c in enumerate(chars)}
    vocab = len(chars) + (-len(chars)) % 4  # a vocabulary that splits evenly
    gt.manual_seed(0)
    model = GPT(vocab, d_model, heads, layers, seq)

    def loss_fn(logits, y):
        n = logits.shape[0] * logits.shape[1]  # a micro-batch's tokens, in pp
        return nn.functional.cross_entropy(logits.reshape(n, vocab), y.reshape(n))

    data_sbp, pipe, params = None, None, model.parameters()
    if layout == "pp":  # stage s on rank s; the batch goes in broadcast, to the first and last stage
        mesh, data_sbp = gt.placement(device, [0, 1]), (B,)
        parts = stages(model, 2)
        for s, part in enumerate(parts):
            part.to_global(gt.placement(device, [s]), B)
        pipe = gt.pipeline.Pipeline(parts, schedule="1f1b", micro_batches=micro_batches, loss_fn=loss_fn)
        # every rank's optimizer holds every stage's parameters (hollow where the rank holds no
        # piece of them), so every rank makes the same calls
        params = [p for part in parts for p in part.parameters()]
    elif layout != "local":
        mesh = gt.placement(device, [[0, 1], [2, 3]] if layout == "2d" else [0, 1])
        data_sbp = lay_out(model, mesh, layout)
    opt = gt.optim.AdamW(params, lr=lr, weight_decay=0.0)
    losses = []
    for step, (x, y) in enumerate(batches(text, vocab_index, batch, seq, steps)):
        x, y = gt.tensor(x), gt.tensor(y)
        if data_sbp is not None:
            x, y = (t.to_global(mesh, (B,) * mesh.ndim).to_global(sbp=data_sbp) for t in (x, y))
        if pipe is not None:
            loss = pipe.step(x, target=y)  # forward and backward of every micro-batch
        else:
            loss = loss_fn(model(x), y)
            loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        if not quiet and gt.env.get_rank() == 0 and (step % 5 == 0 or step == steps - 1):
            print(f"step {step} loss {losses[-1]:.6f}", flush=True)
    return losses


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layout", choices=["local", "dp", "tp", "2d", "pp"], default="local")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--d_model", type=int, default=64)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="the placements' type (not for local)")
    args = p.parse_args()
    train(args.layout, args.steps, layers=args.layers, d_model=args.d_model, device=args.device)
