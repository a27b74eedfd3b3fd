"""OneFlow's flow.unittest face: a test file written for OneFlow (only imports changed) runs its
skip_unless_1n<K>d tests in a K-rank job and skips the others, with OneFlow's env queries."""
import os
import subprocess
import sys
import textwrap

from conftest import REPO

# What OneFlow's own tests look like (python/oneflow/test/...): flow.unittest.TestCase, a
# skip_unless decorator per job shape, flow.unittest.env queries.
ONEFLOW_STYLE = textwrap.dedent('''
    import os
    import unittest
    import globaltensor as flow
    import globaltensor.unittest
    from globaltensor.unittest.env import device_num


    class TestJobShape(flow.unittest.TestCase):
        @flow.unittest.skip_unless_1n1d()
        def test_one_rank(test_case):
            test_case.assertEqual(flow.env.get_world_size(), 1)

        @flow.unittest.skip_unless_1n2d()
        def test_two_ranks(test_case):
            p = flow.placement("cpu", ranks=[0, 1])
            x = flow.ones(4, 2, placement=p, sbp=flow.sbp.split(0))
            test_case.assertEqual(x.to_local().shape, flow.Size([2, 2]))
            test_case.assertEqual(flow.unittest.env.world_size(), 2)

        @flow.unittest.skip_unless_2n2d()
        def test_two_nodes(test_case):
            pass

        def test_env(test_case):
            test_case.assertEqual(flow.unittest.env.node_size(), 1)
            test_case.assertEqual(device_num(), flow.env.get_world_size())
            test_case.assertEqual(flow.unittest.env.get_world_size(), flow.env.get_world_size())
            test_case.assertIsInstance(flow.unittest.env.eager_execution_enabled(), bool)
            test_case.assertEqual(flow.unittest.dataset_dir("mnist"), os.path.join(
                os.getenv("ONEFLOW_TEST_DATASET_DIR") or "/dataset", "mnist"))


    if __name__ == "__main__":
        unittest.main(verbosity=2)
''')


def _run(tmp_path, nproc):
    script = tmp_path / "test_job_shape.py"
    script.write_text(ONEFLOW_STYLE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONEFLOW_TEST_")}
    env["PYTHONPATH"] = os.pathsep.join([REPO] + [p for p in [env.get("PYTHONPATH")] if p])
    cmd = [sys.executable, "-m", "globaltensor.distributed.launch", "--nproc_per_node", str(nproc), str(script)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stderr


def test_one_rank_job_runs_1n1d_and_skips_the_rest(tmp_path):
    out = _run(tmp_path, 1)
    assert "test_one_rank (__main__.TestJobShape" in out
    assert "test_two_ranks" in out and "skipped 'only runs when node_size is 1 and device_num is 2" in out
    assert "Ran 4 tests" in out and "OK (skipped=2)" in out


def test_two_rank_job_runs_1n2d_and_skips_the_rest(tmp_path):
    out = _run(tmp_path, 2)
    assert out.count("OK (skipped=2)") == 2, out  # each rank runs test_two_ranks and test_env
    assert "skipped 'only runs when node_size is 1 and device_num is 1" in out


def test_the_package_loads_unittest_only_when_asked():
    code = ("import sys, globaltensor as g; assert 'globaltensor.unittest' not in sys.modules; "
            "assert 'unittest' not in sys.modules; u = g.unittest; assert u.TestCase is sys.modules['unittest'].TestCase; "
            "assert not hasattr(g, 'no_such_name')")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": REPO}, timeout=60)
