"""The models the graph tests share: the OneFlow tutorial's ToyModel and an nn.Graph of its training step."""
import globaltensor.nn as nn


class ToyModel(nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        self.net1 = nn.Linear(10, 20)
        self.relu = nn.ReLU()
        self.drop = nn.Dropout(dropout)
        self.net2 = nn.Linear(20, 16)

    def forward(self, x):
        return self.net2(self.drop(self.relu(self.net1(x))))


class TrainGraph(nn.Graph):
    """One step: the MSE loss of model(x) against y, backward, and the optimizer's update."""

    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        return loss
