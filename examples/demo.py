"""Two-process demo: global tensors, ops with automatic SBP, autograd, and the loss falling.

    python -m globaltensor.distributed.launch --nproc_per_node 2 examples/demo.py

Fits y = X @ w_true with plain gradient descent. The batch is split over the ranks (S(0)),
the weight is broadcast (B): the matmul needs no communication, the loss is partial until
it is read, and the weight's gradient is summed over the ranks by one all_reduce. Run it
with plain `python examples/demo.py` and the numbers agree (to float32 rounding: the ranks
sum in another order).
"""
import globaltensor as gt

rank = gt.env.get_rank()
placement = gt.placement.all("cpu")
S0, B = gt.sbp.split(0), gt.sbp.broadcast

gt.manual_seed(0)
x = gt.randn(256, 8, placement=placement, sbp=S0)        # each rank holds its rows of the batch
w_true = gt.randn(8, 1, placement=placement, sbp=B)
y = x @ w_true                                             # S(0) @ B -> S(0), no communication
w = gt.zeros(8, 1, placement=placement, sbp=B, requires_grad=True)

for step in range(31):
    with gt.debug.count_collectives() as counted:
        loss = gt.mse_loss(x @ w, y)                       # partial sum until it is needed
        loss.backward()                                    # dL/dw: B leaf, one all_reduce
    with gt.no_grad():
        w = (w - 0.05 * w.grad).detach().requires_grad_()
    value = loss.item()                                    # reading it reduces the partial sum
    if rank == 0 and step % 5 == 0:
        print(f"step {step:2d}  loss {value:.3e}  (loss sbp {loss.sbp[0]}, collectives {dict(counted)})")
if rank == 0:
    print("max |w - w_true| =", float(abs(w - w_true).max().item()))
