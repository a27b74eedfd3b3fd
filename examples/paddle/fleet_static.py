"""Paddle's Fleet collective example in static mode (the seed page), with only the imports changed
and fewer steps. Each rank feeds its own random batch; the gradients are averaged over the ranks.

    python -m globaltensor.paddle.distributed.launch --nproc_per_node 2 examples/paddle/fleet_static.py
"""
import os
import sys

import numpy as np
import globaltensor.paddle as paddle
import globaltensor.paddle.distributed.fleet.base.role_maker as role_maker
import globaltensor.paddle.distributed.fleet as fleet

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # added: nets.py lies beside this file
from nets import mlp  # noqa: E402

paddle.enable_static()


def gen_data():
    return {"x": np.random.random(size=(128, 32)).astype('float32'),
            "y": np.random.randint(2, size=(128, 1)).astype('int64')}


input_x = paddle.static.data(name="x", shape=[None, 32], dtype='float32')
input_y = paddle.static.data(name="y", shape=[None, 1], dtype='int64')

cost = mlp(input_x, input_y)
optimizer = paddle.optimizer.SGD(learning_rate=0.01)

role = role_maker.PaddleCloudRoleMaker(is_collective=True)
fleet.init(role)

strategy = fleet.DistributedStrategy()
optimizer = fleet.distributed_optimizer(optimizer, strategy=strategy)
optimizer.minimize(cost)

place = paddle.CUDAPlace(int(os.environ.get('FLAGS_selected_gpus', 0)))
exe = paddle.static.Executor(place)
exe.run(paddle.static.default_startup_program())

step = 21
for i in range(step):
    cost_val = exe.run(feed=gen_data(), fetch_list=[cost.name])
    print("worker_index: %d, step%d cost = %f" % (fleet.worker_index(), i, cost_val[0]))
