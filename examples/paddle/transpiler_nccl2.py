"""Paddle's DistributeTranspiler example in nccl2 mode (the API page's), with the imports changed.

The seed's own lines are kept; the lines it leaves out are added and marked `# added:` (the
trainer id and endpoints from the launcher's PADDLE_* variables instead of fixed addresses,
running the startup program, a training loop with data), and use_cuda is False on a machine
without a GPU (`# changed:`; the seed's True raises a clear error there). Each trainer feeds its
share of one global batch per step, so the job trains as one process on the stacked batch:

    python -m globaltensor.distributed.launch --nproc_per_node 2 examples/paddle/transpiler_nccl2.py
    python examples/paddle/transpiler_nccl2.py          # one process, the whole batch
"""
import os

import numpy as np
import globaltensor.paddle as paddle
import globaltensor.paddle.fluid as fluid

paddle.seed(2024)  # added: every trainer (and one process) starts from the same parameters

x = fluid.layers.data(name='x', shape=[13], dtype='float32')
y = fluid.layers.data(name='y', shape=[1], dtype='float32')
y_predict = fluid.layers.fc(input=x, size=1, act=None)

cost = fluid.layers.square_error_cost(input=y_predict, label=y)
avg_loss = fluid.layers.mean(cost)

sgd_optimizer = fluid.optimizer.SGD(learning_rate=0.001)
sgd_optimizer.minimize(avg_loss)

# for nccl2 mode
trainer_num = int(os.environ.get("PADDLE_TRAINERS_NUM", "1"))  # added: the launcher's (the seed: 2)
trainer_id = int(os.environ.get("PADDLE_TRAINER_ID", "0"))  # added: the launcher's (the seed: 0)
config = fluid.DistributeTranspilerConfig()
config.mode = "nccl2"
trainer_endpoints = os.environ.get("PADDLE_TRAINER_ENDPOINTS", "127.0.0.1:6174")  # added (the seed: two ip:port)
current_endpoint = os.environ.get("PADDLE_CURRENT_ENDPOINT", "127.0.0.1:6174")  # added
t = fluid.DistributeTranspiler(config=config)
t.transpile(trainer_id=trainer_id, trainers=trainer_endpoints, current_endpoint=current_endpoint)
exe = fluid.ParallelExecutor(
    use_cuda=False,  # changed: the seed's True needs a GPU
    loss_name=avg_loss.name,
    num_trainers=trainer_num,
    trainer_id=trainer_id
)

# added: the startup program and a training loop (each trainer its share of one global batch)
fluid.Executor(fluid.CPUPlace()).run(fluid.default_startup_program())
GLOBAL_BATCH = 16
true_w = np.linspace(-1.0, 1.0, 13).astype('float32').reshape(13, 1)
for step in range(10):
    rng = np.random.default_rng(step)
    data_x = rng.random((GLOBAL_BATCH, 13), dtype=np.float32)
    data_y = data_x @ true_w + 0.5
    share = GLOBAL_BATCH // trainer_num
    mine = slice(trainer_id * share, (trainer_id + 1) * share)
    loss, = exe.run(fetch_list=[avg_loss.name], feed={'x': data_x[mine], 'y': data_y[mine]})
    print(f"step {step} loss = {float(loss):.6f}")
w = fluid.global_scope().find_var("fc_0.w_0").get_tensor()
print("w = " + " ".join(f"{v:.7f}" for v in np.asarray(w.numpy()).ravel()))
