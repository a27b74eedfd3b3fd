# %% [markdown]
# # 08 · Pipeline parallelism
#
# Cut a model into stages, put each stage's parameters on its own placement, and let
# `gt.pipeline.Pipeline` run the batch through them micro-batch by micro-batch: while rank 1
# works on micro-batch 0 in the second stage, rank 0 already runs micro-batch 1 in the first.
# Slices of an `nn.Sequential` keep the model's parameter names (`model[4:]` still holds
# `4.weight`), so the stages together have the whole model's state dict.
#
# `pipe.step(x, target=y)` runs the forward and backward of every micro-batch, in the order
# the schedule gives, and returns the loss of the whole batch on every rank. Every rank makes
# the same call. The gradients are those of the unpipelined model on the whole batch
# (micro-batches weighted by their size), so an optimizer step after it is the usual one.
#
# Below, a 4-block MLP trained for a few steps with each of the three schedules gives the
# losses of a one-process run of the same model to float32 rounding.

# %%
import contextlib
import io

import numpy as np

import globaltensor as gt
import globaltensor.nn as nn
from globaltensor import distributed as dist

B = gt.sbp.broadcast
CUTS = {2: [(0, 4), (4, 7)], 4: [(0, 2), (2, 4), (4, 6), (6, 7)]}  # stage boundaries over the 7 modules


def build():
    gt.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                         nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3))


def data(batch):
    rng = np.random.default_rng(7)
    return rng.standard_normal((batch, 6)).astype(np.float32), rng.standard_normal((batch, 3)).astype(np.float32)


def train_alone(batch=12, steps=4):
    model = build()
    opt = gt.optim.SGD(model.parameters(), lr=0.1)
    x, y = (gt.tensor(a) for a in data(batch))
    losses = []
    for _ in range(steps):
        loss = nn.MSELoss()(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def pipe_for(schedule, micro_batches=4):
    """The model cut into stages: 2 stages on ranks [0] and [1], or for 'interleaved' 4 stages
    on [0], [1], [0], [1]."""
    model = build()
    n_stages = 4 if schedule == "interleaved" else 2
    stages = [model[a:b] for a, b in CUTS[n_stages]]
    for s, stage in enumerate(stages):
        stage.to_global(gt.placement("cpu", [s % 2]), B)
    return gt.pipeline.Pipeline(stages, schedule=schedule, micro_batches=micro_batches, loss_fn=nn.MSELoss())


def train_pipelined(schedule, batch=12, steps=4):
    pipe = pipe_for(schedule)
    opt = gt.optim.SGD([p for stage in pipe.stages for p in stage.parameters()], lr=0.1)
    both = gt.placement("cpu", [0, 1])
    x, y = (gt.tensor(a).to_global(both, B) for a in data(batch))  # moved to the first / last stage
    losses = []
    for _ in range(steps):
        loss = pipe.step(x, target=y)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())  # the loss is on every rank
    return losses


alone = train_alone()
print("one process:", np.round(alone, 6))
for schedule in ("gpipe", "1f1b", "interleaved"):
    rank0, rank1 = dist.spawn(train_pipelined, args=(schedule,), nprocs=2)
    print(f"{schedule:12}", np.round(rank0, 6))
    assert rank0 == rank1  # both ranks get the same loss
    assert np.allclose(rank0, alone, rtol=1e-5, atol=1e-6)  # to float32 rounding

# %% [markdown]
# ## The schedule, drawn
#
# `pipe.explain()` prints the schedule as a grid of pipeline ranks by time (a forward `F`
# takes one unit, a backward `B` two; `F1.2` is the forward of stage 1 on micro-batch 2, `.`
# is idle time). With `p` pipeline ranks and `m` micro-batches, the first rank waits for the
# last one to start and the last one waits for the first to finish: the *bubble*, an idle
# fraction `(p-1)/(m+p-1)` of the step in both GPipe and 1F1B. More micro-batches make it
# smaller.
#
# The two differ in memory. GPipe runs every forward before any backward, so each rank holds
# the activations of all `m` micro-batches at once. 1F1B starts the backward of a micro-batch
# as soon as it can and then alternates one forward and one backward, so rank `r` holds at
# most `p - r` of them, whatever `m` is. The footer's last line gives these peaks.
#
# `explain` computes the grid without running anything, but the pipeline needs its stages'
# placements, so we build it in a 2-rank job and print the text here.

# %%
def explain(schedule):
    with contextlib.redirect_stdout(io.StringIO()):  # explain prints; we return the text instead
        return pipe_for(schedule).explain()


p, m = 2, 4
for schedule in ("gpipe", "1f1b"):
    text = dist.spawn(explain, args=(schedule,), nprocs=2)[0]
    print(text, end="\n\n")
    assert "bubble" in text and f"{(p - 1) / (m + p - 1):.1%}" in text  # the formula's 20.0%
    in_flight = next(line for line in text.splitlines() if line.startswith("activations in flight"))
    peaks = [int(n) for n in in_flight.split(":")[1].split(",")]
    assert peaks == ([m, m] if schedule == "gpipe" else [p, p - 1]), in_flight

# %% [markdown]
# ## Uneven micro-batches
#
# The batch need not divide by the number of micro-batches: 10 rows in 4 micro-batches are
# micro-batches of 3, 3, 2 and 2 rows. Each micro-batch's mean loss is weighted by its share
# of the rows, so the loss and the gradients are still the whole batch's.

# %%
alone = train_alone(batch=10)
for schedule in ("gpipe", "1f1b"):
    pipelined = dist.spawn(train_pipelined, args=(schedule, 10), nprocs=2)[0]
    print(f"{schedule:6} batch 10, m=4:", np.round(pipelined, 6))
    assert np.allclose(pipelined, alone, rtol=1e-5, atol=1e-6)

# %% [markdown]
# ## A stage that fails
#
# If a stage raises on one rank, the ranks waiting for it would otherwise hang in their next
# transfer. Instead every rank raises `gt.pipeline.PipelineError`, naming the stage and the
# micro-batch. Here the second stage fails on its third micro-batch (micro-batch 2).

# %%
class FailsOnce(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner, self.calls = inner, 0

    def forward(self, x):
        if gt.env.get_rank() in x.placement:  # the rank that holds the stage computes it
            self.calls += 1
            if self.calls == 3:
                raise ValueError("out of memory (pretend)")
        return self.inner(x)


def failing_step():
    pipe = pipe_for("1f1b")
    pipe.stages[1] = FailsOnce(pipe.stages[1])
    both = gt.placement("cpu", [0, 1])
    x, y = (gt.tensor(a).to_global(both, B) for a in data(8))
    try:
        pipe.step(x, target=y)
    except gt.pipeline.PipelineError as e:
        return str(e)
    return "no error"


for rank, message in enumerate(dist.spawn(failing_step, nprocs=2)):
    print(f"rank {rank}: {message}")
    assert "stage 1, micro-batch 2" in message, message
