"""python -m globaltensor.paddle.distributed.fleet.launch: Paddle 2's fleet launcher, the same flags as launch."""
import sys

from ..launch import main

if __name__ == "__main__":
    sys.exit(main())
