"""Paddle's DataParallel state_dict / paddle.save / set_state_dict example (the seed page), with
only the imports changed. Added for the tests: the reloaded table's sum is printed.

    python -m globaltensor.distributed.launch --nproc_per_node 2 examples/paddle/state_dict.py
"""
import globaltensor.paddle as paddle
import globaltensor.paddle.distributed as dist

dist.init_parallel_env()

emb = paddle.nn.Embedding(10, 10)
emb = paddle.DataParallel(emb)

state_dict = emb.state_dict()
paddle.save(state_dict, "paddle_dy.pdparams")

para_state_dict = paddle.load("paddle_dy.pdparams")
emb.set_state_dict(para_state_dict)
print(f"rank {dist.get_rank()} reloaded {len(para_state_dict)} tensors, "  # added for the tests
      f"weight sum {float(emb.weight.sum()):.6f}")
