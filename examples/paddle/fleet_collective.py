"""Paddle's Fleet collective example in dygraph mode (the quick start), with only the imports
changed. Added for the tests: nothing (it prints its losses itself).

    python -m globaltensor.paddle.distributed.launch --nproc_per_node 2 examples/paddle/fleet_collective.py
"""
import globaltensor.paddle as paddle
import globaltensor.paddle.nn as nn
from globaltensor.paddle.distributed import fleet


class LinearNet(nn.Layer):
    def __init__(self):
        super(LinearNet, self).__init__()
        self._linear1 = nn.Linear(10, 10)
        self._linear2 = nn.Linear(10, 1)

    def forward(self, x):
        return self._linear2(self._linear1(x))


# 1. initialize fleet environment
fleet.init(is_collective=True)

# 2. create layer & optimizer
layer = LinearNet()
loss_fn = nn.MSELoss()
adam = paddle.optimizer.Adam(
    learning_rate=0.001, parameters=layer.parameters())

# 3. get data_parallel model using fleet
adam = fleet.distributed_optimizer(adam)
dp_layer = fleet.distributed_model(layer)

# 4. run layer
for step in range(20):
    inputs = paddle.randn([10, 10], 'float32')
    outputs = dp_layer(inputs)
    labels = paddle.randn([10, 1], 'float32')
    loss = loss_fn(outputs, labels)

    print("step:{}\tloss:{}".format(step, loss.numpy()))

    loss.backward()

    adam.step()
    adam.clear_grad()
