"""python -m globaltensor.paddle.distributed.launch: Paddle's launcher flags over globaltensor's launcher.

Accepts --nproc_per_node, --devices / --gpus / --selected_gpus (a comma list: one rank per device
when --nproc_per_node is not given; exported as CUDA_VISIBLE_DEVICES, each rank takes the one at
its LOCAL_RANK; without it, CUDA_VISIBLE_DEVICES's list counts, as in Paddle:
`CUDA_VISIBLE_DEVICES=0,1 python -m ...launch x.py` starts 2 ranks), --log_dir, --nnodes,
--master ip:port, --rank (this node's index), --job_id and --run_mode. Every rank gets Paddle's
variables (PADDLE_TRAINER_ID, ...) and torchrun's. A parameter-server job (--run_mode=ps, or any of
--server_num, --worker_num / --trainer_num, --servers, --workers / --trainers) goes to ps_launch.
"""
import argparse
import os
import sys

from ...distributed import launch as _launch
from . import ps_launch


def _parse(argv):
    p = argparse.ArgumentParser(prog="python -m globaltensor.paddle.distributed.launch")
    p.add_argument("--nproc_per_node", "--nproc-per-node", type=int, default=None)
    p.add_argument("--devices", "--gpus", "--selected_gpus", dest="devices", default=None)
    p.add_argument("--log_dir", "--log-dir", default=None)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--master", default=None, help="ip:port of node 0")
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--job_id", default=None)
    p.add_argument("--run_mode", "--run-mode", default="collective", choices=("collective", "ps"))
    p.add_argument("--server_num", "--server-num", type=int, default=None, help="PS job: servers to start here")
    p.add_argument("--worker_num", "--worker-num", "--trainer_num", "--trainer-num", dest="worker_num", type=int,
                   default=None, help="PS job: trainers to start here")
    p.add_argument("--servers", default=None, help="PS job: every server's ip:port, comma-separated")
    p.add_argument("--workers", "--trainers", dest="workers", default=None,
                   help="PS job: every trainer's ip:port, comma-separated")
    p.add_argument("--grace_period", "--grace-period", type=float, default=5.0,
                   help="seconds between SIGTERM and SIGKILL when stopping processes (default 5)")
    p.add_argument("-m", "--module", action="store_true", help="run the script argument as a module (python -m)")
    p.add_argument("script")
    p.add_argument("script_args", nargs=argparse.REMAINDER)
    args = _launch.parse_before_script(p, list(argv))
    devices = args.devices if args.devices is not None else os.environ.get("CUDA_VISIBLE_DEVICES", "")
    args.devices = [d.strip() for d in devices.split(",") if d.strip() != ""]
    return args


def _launcher_argv(args):
    nproc = args.nproc_per_node or len(args.devices) or 1
    out = ["--nproc_per_node", str(nproc), "--nnodes", str(args.nnodes), "--node_rank", str(args.rank)]
    if args.grace_period != 5.0:
        out += ["--grace_period", str(args.grace_period)]
    if args.master:
        addr, _, port = args.master.rpartition(":")
        out += ["--master_addr", addr, "--master_port", port]
    if args.log_dir:
        out += ["--log_dir", args.log_dir]
    return out + (["-m"] if args.module else []) + [args.script] + args.script_args


def translate(argv):
    """Paddle's argv -> globaltensor.distributed.launch's argv."""
    return _launcher_argv(_parse(argv))


def main(argv=None):
    args = _parse(sys.argv[1:] if argv is None else argv)
    if ps_launch.wants_ps(args):
        if args.nproc_per_node is not None or args.master or args.nnodes != 1:
            sys.stderr.write("[globaltensor.launch] error: --nproc_per_node / --nnodes / --master are collective "
                             "flags; a PS job is --server_num / --worker_num or --servers / --workers\n")
            return 2
        return ps_launch.main(args)
    if args.devices:  # the ranks inherit it
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(args.devices)
    return _launch.main(_launcher_argv(args))


if __name__ == "__main__":
    sys.exit(main())
