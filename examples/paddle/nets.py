"""The `nets` module the Fleet collective example imports: a small MLP classifier (as in Paddle's docs)."""
import globaltensor.paddle as paddle


def mlp(input_x, input_y, hid_dim=128, label_dim=2):
    fc_1 = paddle.static.nn.fc(x=input_x, size=hid_dim, activation='tanh')
    fc_2 = paddle.static.nn.fc(x=fc_1, size=hid_dim, activation='tanh')
    prediction = paddle.static.nn.fc(x=[fc_2], size=label_dim, activation='softmax')
    cost = paddle.nn.functional.cross_entropy(input=prediction, label=input_y)
    avg_cost = paddle.mean(x=cost)
    return avg_cost
