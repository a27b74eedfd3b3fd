"""Paddle's DataParallel.no_sync example (the seed page), with only the imports changed. Added for
the tests: the gradient of the weight is printed.

    python -m globaltensor.distributed.launch --nproc_per_node 2 examples/paddle/data_parallel_no_sync.py
"""
import globaltensor.paddle as paddle
import globaltensor.paddle.nn as nn
import globaltensor.paddle.distributed as dist


class SimpleNet(nn.Layer):
    def __init__(self):
        super().__init__()
        self._linear = nn.Linear(10, 1)

    def forward(self, x):
        return self._linear(x)


dist.init_parallel_env()
model = SimpleNet()
dp_model = paddle.DataParallel(model)

inputs_1 = paddle.randn([10, 10], 'float32')
inputs_2 = paddle.ones([10, 10], 'float32')

with dp_model.no_sync():
    # gradients will not be synchronized
    dp_model(inputs_1).backward()

# synchronization happens here
dp_model(inputs_2).backward()
print(f"rank {dist.get_rank()} weight grad sum {float(model._linear.weight.grad.sum()):.6f}")  # added for the tests
