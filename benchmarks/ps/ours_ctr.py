"""The CTR model of paddle_ctr.py on globaltensor's Paddle face: the same code, the imports changed only.

    python -m globaltensor.paddle.distributed.launch --server_num=1 --worker_num=2 \\
        benchmarks/ps/ours_ctr.py --mode sync --out-dir /tmp/ctr
    python benchmarks/ps/ours_ctr.py --mode local --out-dir /tmp/ctr     # one process, no PS
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

if __name__ == "__main__":
    import globaltensor.paddle as paddle
    from globaltensor.paddle.distributed import fleet
    from paddle_ctr import main
    main(paddle, fleet, sys.argv[1:])
