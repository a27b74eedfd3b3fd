"""Two-process demo of what exists today: shared-memory collectives on numpy arrays.

    python -m globaltensor.distributed.launch --nproc_per_node 2 examples/collectives_demo.py
"""
import time

import numpy as np

import globaltensor as gt
from globaltensor import distributed as dist

rank, world = gt.env.get_rank(), gt.env.get_world_size()

x = np.full(4, rank + 1.0)
dist.all_reduce(x)  # in place: every rank now holds the sum
print(f"rank {rank}: all_reduce  -> {x}")

pieces = dist.all_gather(np.arange(rank + 1) + 10 * rank)  # lengths may differ per rank
print(f"rank {rank}: all_gather  -> {pieces}")

mine = dist.reduce_scatter(np.arange(5.0))  # sum, then each rank keeps its piece (3 + 2 rows)
print(f"rank {rank}: reduce_scatter -> {mine}")

big = dist.empty_shared((4 << 20,), np.float32)  # 16 MiB in shared memory: peers read it in place
big[...] = 1
dist.barrier()
start = time.perf_counter()
for _ in range(10):
    dist.all_reduce(big)
elapsed = (time.perf_counter() - start) / 10
if rank == 0:
    print(f"all_reduce of 16 MiB over {world} ranks: {elapsed * 1e3:.2f} ms per call "
          f"({big.nbytes / elapsed / 1e9:.1f} GB/s); each element is now {world}**10 = {big[0]:.0f}")
