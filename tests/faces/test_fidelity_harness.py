"""benchmarks/fidelity's OneFlow harness without OneFlow's files: its import rewriting, its static reading
of a test file (job shape, GPU-only, switched off), and one small OneFlow-style file run end to end."""
import json
import os
import subprocess
import sys
import textwrap

from conftest import REPO

sys.path.insert(0, os.path.join(REPO, "benchmarks", "fidelity"))
import run_oneflow_tests as harness  # noqa: E402
import _static  # noqa: E402


def test_only_import_lines_are_rewritten():
    cases = {
        "import oneflow as flow": "import globaltensor as flow",
        "import oneflow": "import globaltensor as oneflow",
        "import oneflow.unittest": "import globaltensor.unittest; import globaltensor as oneflow",
        "import oneflow.nn.functional as F": "import globaltensor.nn.functional as F",
        "from oneflow.nn.parallel import DistributedDataParallel as ddp":
            "from globaltensor.nn.parallel import DistributedDataParallel as ddp",
        "from oneflow.test_utils.automated_test_util import *": "from test_utils.automated_test_util import *",
        "    from oneflow import nn": "    from globaltensor import nn",
        "import oneflowx": "import oneflowx",
        "x = oneflow.ones(2)  # import oneflow": "x = oneflow.ones(2)  # import oneflow",
    }
    for line, want in cases.items():
        assert harness.rewrite_line(line) == want, line


ONEFLOW_STYLE = textwrap.dedent('''
    import os
    import unittest
    import oneflow as flow
    import oneflow.unittest


    class TestShapes(flow.unittest.TestCase):
        @flow.unittest.skip_unless_1n2d()
        def test_split(test_case):
            x = flow.ones(4, placement=flow.placement("cpu", ranks=[0, 1]), sbp=flow.sbp.split(0))
            test_case.assertEqual(x.to_local().shape[0], 2)

        @flow.unittest.skip_unless_1n1d()
        def test_broken(test_case):
            flow.no_such_op()

        @unittest.skipIf(os.getenv("ONEFLOW_TEST_CPU_ONLY"), "only test cpu cases")
        @flow.unittest.skip_unless_1n1d()
        def test_cuda(test_case):
            flow.ones(2, device="cuda")

        @unittest.skip("skip for now")
        @flow.unittest.skip_unless_1n1d()
        def test_off(test_case):
            pass
''')


def test_static_reading(tmp_path):
    path = tmp_path / "test_shapes.py"
    path.write_text(ONEFLOW_STYLE)
    got = {t["id"].split("::")[-1]: t for t in _static.tests_of(str(path), "test_shapes.py")}
    assert got["test_split"]["shape"] == (1, 2) and got["test_broken"]["shape"] == (1, 1)
    assert got["test_cuda"]["gpu"] and not got["test_split"]["gpu"] and not got["test_broken"]["gpu"]
    assert got["test_off"]["disabled"] and not got["test_split"]["disabled"]


def test_a_small_tree_end_to_end(tmp_path):
    tree = tmp_path / "oneflow"
    (tree / "test" / "tensor").mkdir(parents=True)
    (tree / "test_utils").mkdir()
    (tree / "test_utils" / "__init__.py").write_text("")
    (tree / "test" / "tensor" / "test_shapes.py").write_text(ONEFLOW_STYLE)
    out = tmp_path / "result.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONEFLOW_TEST_")}
    proc = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "fidelity", "run_oneflow_tests.py"),
                           "--oneflow-src", str(tree), "--json", str(out), "--timeout", "200"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(out.read_text())
    status = {k.split("::")[-1]: v["status"] for k, v in report["tests"].items()}
    assert status == {"test_split": "passed", "test_broken": "failed", "test_cuda": "skipped", "test_off": "skipped"}
    assert report["totals"]["passed"] == 1 and report["totals"]["runnable"] == 2 and report["totals"]["total"] == 4
    assert "no_such_op" in report["tests"]["tensor__test_shapes.py::TestShapes::test_broken"]["error"]
