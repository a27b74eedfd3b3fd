"""Paddle's DistributeTranspiler example in pserver mode (the API page's), with the imports changed.

The seed's own lines are kept; the lines it leaves out are added and marked `# added:` (the role,
endpoints and trainer id from Paddle's environment contract instead of fixed addresses, an
executor, the trainers' data and training loop, exe.close() telling the pservers a trainer is
done), and `# changed:` marks a seed line that differs. Each trainer feeds its share of one
global batch per step, so in sync mode the job trains as one process on the stacked batch.
Start each role the way the page says (here: two pservers and two trainers on one host):

    TRAINING_ROLE=PSERVER PADDLE_PSERVERS_IP_PORT_LIST=127.0.0.1:6174,127.0.0.1:6175 PADDLE_TRAINERS_NUM=2 \\
        POD_IP=127.0.0.1 PADDLE_PORT=6174 python examples/paddle/transpiler_pserver.py   # and PADDLE_PORT=6175
    TRAINING_ROLE=TRAINER PADDLE_PSERVERS_IP_PORT_LIST=127.0.0.1:6174,127.0.0.1:6175 PADDLE_TRAINERS_NUM=2 \\
        PADDLE_TRAINER_ID=0 python examples/paddle/transpiler_pserver.py                 # and PADDLE_TRAINER_ID=1
    python examples/paddle/transpiler_pserver.py          # no TRAINING_ROLE: one process, the whole batch

or let the launcher set the variables: python -m globaltensor.paddle.distributed.launch --server_num=2
--worker_num=2 examples/paddle/transpiler_pserver.py
"""
import os

import numpy as np
import globaltensor.paddle as paddle
import globaltensor.paddle.fluid as fluid

paddle.seed(2024)  # added: every process builds the same parameters (the pservers start from them)

x = fluid.layers.data(name='x', shape=[13], dtype='float32')
y = fluid.layers.data(name='y', shape=[1], dtype='float32')
y_predict = fluid.layers.fc(input=x, size=1, act=None)

cost = fluid.layers.square_error_cost(input=y_predict, label=y)
avg_loss = fluid.layers.mean(cost)

sgd_optimizer = fluid.optimizer.SGD(learning_rate=0.001)
sgd_optimizer.minimize(avg_loss)

exe = fluid.Executor(fluid.CPUPlace())  # added: the page's snippet uses an exe it does not show

# for pserver mode
pserver_endpoints = os.environ.get("PADDLE_PSERVERS_IP_PORT_LIST", "")  # changed: the seed's fixed two ip:port
current_endpoint = f"{os.environ.get('POD_IP', '')}:{os.environ.get('PADDLE_PORT', '')}"  # changed: likewise
trainer_id = int(os.environ.get("PADDLE_TRAINER_ID", "0"))  # changed: the seed's 0
trainers = int(os.environ.get("PADDLE_TRAINERS_NUM", "1"))  # changed: the seed's 4
role = os.environ.get("TRAINING_ROLE", "")  # changed: the seed's "PSERVER"

GLOBAL_BATCH, STEPS = 16, 10  # added: the data of the training loop below
true_w = np.linspace(-1.0, 1.0, 13).astype('float32').reshape(13, 1)


def batches():  # added: each trainer's share of one global batch per step
    share = GLOBAL_BATCH // trainers
    for step in range(STEPS):
        rng = np.random.default_rng(step)
        data_x = rng.random((GLOBAL_BATCH, 13), dtype=np.float32)
        data_y = data_x @ true_w + 0.5
        mine = slice(trainer_id * share, (trainer_id + 1) * share)
        yield step, {'x': data_x[mine], 'y': data_y[mine]}


if role:  # added: a one-process run (no role) trains without the transpiler
    t = fluid.DistributeTranspiler()
    t.transpile(
         trainer_id, pservers=pserver_endpoints, trainers=trainers)
if role == "PSERVER":
    pserver_program = t.get_pserver_program(current_endpoint)
    pserver_startup_program = t.get_startup_program(current_endpoint,
                                                    pserver_program)
    exe.run(pserver_startup_program)
    exe.run(pserver_program)
elif role == "TRAINER":
    trainer_program = t.get_trainer_program()
    exe.run(fluid.default_startup_program())  # added
    for step, feed in batches():  # added: the seed runs one step without data
        loss, = exe.run(trainer_program, feed=feed, fetch_list=[avg_loss.name])
        print(f"step {step} loss = {float(loss):.6f}")
    exe.close()  # added: this trainer is done (the pservers return once every trainer is)
else:  # added: one process on the whole batch
    exe.run(fluid.default_startup_program())
    for step, feed in batches():
        loss, = exe.run(fluid.default_main_program(), feed=feed, fetch_list=[avg_loss.name])
        print(f"step {step} loss = {float(loss):.6f}")
if role != "PSERVER":  # added: the trained weights
    w = fluid.global_scope().find_var("fc_0.w_0").get_tensor()
    print("w = " + " ".join(f"{v:.7f}" for v in np.asarray(w.numpy()).ravel()))
