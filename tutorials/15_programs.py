# %% [markdown]
# # 15 · Programs: print, save, load, rewrite
#
# A captured step is a `gt.graph.Program`: registers (values with their layouts) and instructions
# that name what they run (a registered op and its attributes, a boxing conversion, an optimizer's
# update op, ...). Because it is data, it prints at two levels, saves to a directory (JSON plus
# safetensors, no pickled code) and loads in a process that never saw the model class. Paddle's
# static mode records into the same form. The reference is `docs/programs.md`.
#
# Everything here runs on the CPU in one process (plus one fresh process for the load).

# %%
import os
import subprocess
import sys
import tempfile

import numpy as np

import globaltensor as gt

WORK = tempfile.mkdtemp(prefix="gt_programs_")

# %% [markdown]
# ## Capture an `nn.Graph` training step
#
# A two-layer MLP, SGD, a graph whose `build` runs forward, backward and the update.

# %%
class MLP(gt.nn.Module):
    def __init__(self):
        super().__init__()
        self.net1, self.net2 = gt.nn.Linear(6, 16), gt.nn.Linear(16, 4)

    def forward(self, x):
        return self.net2(gt.relu(self.net1(x)))


class TrainStep(gt.nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = gt.nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        return loss


gt.manual_seed(0)
model = MLP()
step = TrainStep(model, gt.optim.SGD(model.parameters(), lr=0.1))
rng = np.random.default_rng(0)
batches = [(gt.tensor(rng.standard_normal((8, 6)).astype(np.float32)),
            gt.tensor(rng.standard_normal((8, 4)).astype(np.float32))) for _ in range(5)]
for x, y in batches[:3]:
    print("loss", float(step(x, y)))

# %% [markdown]
# ## Two printed levels
#
# The serial program (global shapes and layouts) and this rank's program as it runs (piece shapes,
# collectives, buffer reuse and frees after planning).

# %%
print(step.program())

# %%
print(step.program(rank=0))

# %% [markdown]
# ## Save, then load in a fresh process
#
# `gt.jit.save` writes the program and the state (parameters, optimizer state) after 3 steps. A
# new Python process, with no `MLP` or `TrainStep` class, loads it and runs the 4th and 5th steps:
# the losses equal the ones the original step gives.

# %%
path = os.path.join(WORK, "step")
gt.jit.save(step, path)
np.save(os.path.join(WORK, "batches.npy"), np.array([[b[0].numpy().ravel().tolist() + b[1].numpy().ravel().tolist()]
                                                     for b in batches[3:]], dtype=np.float32))
print(sorted(os.listdir(path)))

FRESH = f"""
import numpy as np, globaltensor as gt
step = gt.jit.load({path!r})
for row in np.load({os.path.join(WORK, "batches.npy")!r})[:, 0]:
    x, y = row[:48].reshape(8, 6), row[48:].reshape(8, 4)
    print(float(step(gt.tensor(x), gt.tensor(y))))
"""
done = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True, timeout=120)
assert done.returncode == 0, done.stderr
loaded_losses = [float(v) for v in done.stdout.split()]
here_losses = [float(step(x, y)) for x, y in batches[3:]]
print("fresh process:", loaded_losses)
print("original     :", here_losses)
assert loaded_losses == here_losses

# %% [markdown]
# ## Paddle's view of the same program
#
# `global_block().ops` lists the ops with the types Paddle prints (`matmul_v2`, `elementwise_add`,
# `sgd`, ...).

# %%
block = step._cache()["last"].unplanned().global_block()
print([op.type for op in block.ops][:10])

# %% [markdown]
# ## A Paddle static program: `save_inference_model` / `load_inference_model`
#
# Paddle's static mode records into the same program form. Train a small regression for a few
# steps, export the inference program (pruned to the prediction), and load it back without the
# layers that built it.

# %%
import globaltensor.paddle as paddle  # import paddle

paddle.enable_static()
main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    x = paddle.static.data("x", [None, 6], "float32")
    y = paddle.static.data("y", [None, 1], "float32")
    pred = paddle.static.nn.fc(x, 1)
    loss = paddle.mean(paddle.nn.functional.square_error_cost(pred, y))
    paddle.optimizer.SGD(learning_rate=0.05).minimize(loss)
print([op.type for op in main.global_block().ops])

exe = paddle.static.Executor(paddle.CPUPlace())
exe.run(startup)
xs = rng.standard_normal((32, 6)).astype(np.float32)
ys = xs @ np.arange(6, dtype=np.float32).reshape(6, 1) / 6
for i in range(20):
    (l,) = exe.run(main, feed={"x": xs, "y": ys}, fetch_list=[loss])
print("loss after 20 steps", float(l))

prefix = os.path.join(WORK, "regression")
paddle.static.save_inference_model(prefix, [x], [pred], exe, program=main)
program, feeds, fetches = paddle.static.load_inference_model(prefix, exe)
print("feeds", feeds, "ops", [op.type for op in program.global_block().ops])
(got,) = exe.run(program, feed={feeds[0]: xs[:5]}, fetch_list=fetches)
(want,) = exe.run(main.clone(for_test=True), feed={"x": xs[:5], "y": ys[:5]}, fetch_list=[pred])
np.testing.assert_allclose(got, want, rtol=1e-6)
print(got.ravel())
paddle.disable_static()
