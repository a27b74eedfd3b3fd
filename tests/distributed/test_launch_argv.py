"""Both launchers hand the script its own arguments untouched, whatever launcher option they resemble."""
import pytest

from globaltensor.distributed.launch import parse_args
from globaltensor.paddle.distributed.launch import _parse as parse_paddle


def test_script_arguments_that_look_like_launcher_options_reach_the_script():
    # `--worker` is a prefix of Paddle's --worker_num / --workers: argparse called it ambiguous and the job died
    args = parse_paddle(["--nproc_per_node", "2", "train.py", "--worker", "ours", "--rank", "5", "--servers", "x"])
    assert (args.nproc_per_node, args.rank, args.servers, args.script) == (2, 0, None, "train.py")
    assert args.script_args == ["--worker", "ours", "--rank", "5", "--servers", "x"]
    args = parse_args(["--nproc_per_node", "2", "train.py", "--node", "1", "--nproc_per_node", "9"])
    assert (args.nproc_per_node, args.node_rank, args.script) == (2, 0, "train.py")
    assert args.script_args == ["--node", "1", "--nproc_per_node", "9"]


@pytest.mark.parametrize("argv,script,module,rest", [
    (["-m", "--nproc_per_node=2", "pkg.mod", "-x"], "pkg.mod", True, ["-x"]),
    (["--nproc_per_node", "2", "--", "t.py", "--x"], "t.py", False, ["--x"]),
    (["--nproc_per_n", "2", "t.py"], "t.py", False, []),  # an abbreviation before the script still works
])
def test_options_before_the_script_parse_as_before(argv, script, module, rest):
    for parse in (parse_args, parse_paddle):
        args = parse(argv)
        assert (args.nproc_per_node, args.script, args.module, args.script_args) == (2, script, module, rest)


def test_paddle_ps_flags_before_the_script():
    args = parse_paddle(["--run_mode", "ps", "--server_num", "1", "--worker_num", "2", "t.py", "--lr", "0.1"])
    assert (args.run_mode, args.server_num, args.worker_num, args.script_args) == ("ps", 1, 2, ["--lr", "0.1"])
