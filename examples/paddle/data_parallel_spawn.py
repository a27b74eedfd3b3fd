"""Paddle's DataParallel example started by dist.spawn (the seed page), with only the imports
changed. Added for the tests: each step's loss is printed.

    python examples/paddle/data_parallel_spawn.py
"""
import globaltensor.paddle as paddle
import globaltensor.paddle.nn as nn
import globaltensor.paddle.optimizer as opt
import globaltensor.paddle.distributed as dist


class LinearNet(nn.Layer):
    def __init__(self):
        super().__init__()
        self._linear1 = nn.Linear(10, 10)
        self._linear2 = nn.Linear(10, 1)

    def forward(self, x):
        return self._linear2(self._linear1(x))


def train():
    # 1. initialize parallel environment
    dist.init_parallel_env()

    # 2. create data parallel layer & optimizer
    layer = LinearNet()
    dp_layer = paddle.DataParallel(layer)

    loss_fn = nn.MSELoss()
    adam = opt.Adam(
        learning_rate=0.001, parameters=dp_layer.parameters())

    # 3. run layer
    inputs = paddle.randn([10, 10], 'float32')
    outputs = dp_layer(inputs)
    labels = paddle.randn([10, 1], 'float32')
    loss = loss_fn(outputs, labels)

    loss.backward()

    adam.step()
    adam.clear_grad()
    print(f"rank {dist.get_rank()} loss {float(loss):.6f} "  # added for the tests
          f"weight sum {float(layer._linear2.weight.sum()):.6f}")


if __name__ == '__main__':
    # 1. start by ``paddle.distributed.spawn`` (default)
    dist.spawn(train, nprocs=2)
    # 2. start by ``paddle.distributed.launch``
    # train()
