"""Scripts whose ranks do not make the same collective calls:

    print_at_end      `if rank == 0: print(y)` ends the script: its first collective
    print_after_work  the same after the ranks have met in collectives
    crossed           rank 1 skips a conversion on ranks [0, 1] and waits on all ranks
"""
import sys

import globaltensor as gt

case = sys.argv[1]
rank, k = gt.env.get_rank(), gt.env.get_world_size()
everyone = gt.placement("cpu", list(range(k)))
y = gt.randn(4, 3, placement=everyone, sbp=gt.sbp.split(0))
if case == "print_after_work":
    y.sum().item()
if case == "crossed":
    pair = gt.placement("cpu", [0, 1])
    z = gt.randn(4, 3, placement=pair, sbp=gt.sbp.split(0))
    z.to_global(sbp=gt.sbp.broadcast), y.to_global(sbp=gt.sbp.broadcast)  # both groups have met once
    if rank != 1:
        z.to_global(sbp=gt.sbp.broadcast)
    y.to_global(sbp=gt.sbp.broadcast)
elif rank == 0:
    print(y)
