"""Paddle's semi-auto-parallel test scripts run on the Paddle face, with only their imports changed.

    python benchmarks/fidelity/run_paddle_tests.py --paddle-tests DIR [--timeout 120] [--real-paddle]
        [--only SUBSTR] [--json benchmarks/results/fidelity_paddle.json]

DIR holds Paddle's test/auto_parallel/semi_auto_parallel_*.py and reshard_*.py scripts (and the
helpers they import, e.g. semi_auto_parallel_util.py), copied from PaddlePaddle/Paddle; nothing of
Paddle's is kept in this repository. Each script is copied to a scratch directory with its import
lines rewritten (`import paddle` -> `import globaltensor.paddle as paddle`, `import paddle.X as Y`
-> `import globaltensor.paddle.X as Y`, `from paddle.X import Y` -> `from globaltensor.paddle.X
import Y`) and run under `python -m globaltensor.paddle.distributed.launch --nproc_per_node N`
once per environment case of its test_*.py driver (CASES below, read from the drivers), with
backend=cpu. --real-paddle runs the unchanged scripts under `python -m
paddle.distributed.launch` (CPU, gloo) too. Classes: "gpu" (the driver has only GPU cases),
"static" (the script uses Paddle's static-graph or C++ internals: pir, paddle.base.core,
_C_ops, program passes), else "runnable". A script passes when every case exits 0.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASIC = {"dtype": "float32", "seed": "2023"}  # test_semi_auto_parallel_basic.py's defaults
# script -> (ranks, [env cases with backend=cpu], driver's backends); from the test_*.py drivers.
CASES = {
    "semi_auto_parallel_for_matmul.py": (2, [dict(BASIC, NVIDIA_TF32_OVERRIDE="0")], "cpu,gpu"),
    "semi_auto_parallel_for_elementwise.py": (2, [BASIC], "cpu,gpu"),
    "semi_auto_parallel_for_concat.py": (2, [BASIC], "cpu,gpu"),
    "semi_auto_parallel_for_layernorm.py": (2, [BASIC], "cpu,gpu"),
    "semi_auto_parallel_for_reduction.py": (2, [BASIC], "cpu,gpu"),
    "semi_auto_parallel_for_bitwise.py": (2, [{"dtype": "int32", "seed": "2023"}], "cpu,gpu"),
    "semi_auto_parallel_for_add_n.py": (2, [BASIC], "cpu,gpu"),
    "semi_auto_parallel_for_cast.py": (2, [BASIC], "cpu,gpu"),
    "semi_auto_parallel_for_triu.py": (2, [BASIC], "cpu,gpu"),
    "semi_auto_parallel_for_replicated_spmd.py": (2, [BASIC], "cpu,gpu"),
    "semi_auto_parallel_for_embedding_grad.py": (2, [BASIC], "cpu,gpu"),
    "semi_auto_parallel_for_embedding.py": (2, [BASIC], "cpu,gpu (driver not read: basic's cases)"),
    "semi_auto_parallel_for_squeeze.py": (2, [BASIC], "cpu,gpu (driver not read: basic's cases)"),
    "semi_auto_parallel_for_expand.py": (2, [BASIC], "cpu,gpu (driver not read: basic's cases)"),
    "semi_auto_parallel_for_softmax.py": (2, [BASIC], "cpu,gpu"),
    "semi_auto_parallel_pylayer.py": (2, [BASIC], "cpu,gpu"),
    "semi_auto_parallel_unshard_dtensor_api.py": (2, [BASIC], "gpu"),
    "reshard_s_to_r.py": (2, [{"shape": "(10, 20)", "dtype": "float32", "seeds": "2023", "shard": s}
                              for s in "01"], "cpu,gpu"),
    "reshard_r_to_s.py": (2, [{"shape": sh, "dtype": "float32", "seeds": "2023", "shard": s}
                              for sh in ("(10, 20)", "(5, 7)") for s in "01"], "cpu,gpu"),
    "reshard_r_to_p.py": (2, [{"shape": "(10, 20)", "dtype": "float32", "seeds": "2023", "shard": s}
                              for s in "01"], "cpu,gpu"),
    "reshard_s_to_p.py": (2, [{"shape": "(10, 20)", "dtype": "float32", "seeds": "2023"}], "cpu,gpu"),
    "reshard_p_to_s.py": (2, [{"shape": "(11, 20)", "dtype": "float32", "seeds": "2023", "shard": s}
                              for s in "01"], "gpu"),
    "reshard_p_to_r.py": (2, [{"shape": "(10, 20)", "dtype": "float32", "seeds": "2023", "shard": s}
                              for s in "01"], "gpu (commented out in the driver)"),
    "reshard_s_to_s.py": (2, [{"shape": sh, "dtype": "float32", "seeds": "2023"}
                              for sh in ("(6, 20)", "(6, 20, 10)")], "gpu"),
}
HELPERS = ("semi_auto_parallel_util.py",)
STATIC = re.compile(r"paddle\.base\.core|from paddle\.(base|framework) import core|_C_ops|\bpir\b|"
                    r"apply_\w+_pass|switch_to_static_graph|dist_context|enable_static|"
                    r"paddle\.(base|static)\.Program|core\.\w+ReshardFunction")
IMPORTS = [
    (re.compile(r"^(\s*)import paddle\s*$"), r"\1import globaltensor.paddle as paddle"),
    (re.compile(r"^(\s*)import paddle\.([\w.]+) as (\w+)"), r"\1import globaltensor.paddle.\2 as \3"),
    (re.compile(r"^(\s*)from paddle(\.[\w.]+)? import"), r"\1from globaltensor.paddle\2 import"),
]
ERROR_LINE = re.compile(r"^(\w+\.)*\w*(Error|Exception|Exit|Interrupt)\b.*|^AssertionError.*")


def rewrite(text):
    """The script's text with only its import lines pointed at globaltensor.paddle."""
    out = []
    for line in text.splitlines():
        for pat, rep in IMPORTS:
            line = pat.sub(rep, line)
        out.append(line)
    return "\n".join(out) + "\n"


def classify(name, text):
    """'gpu', 'static' or 'runnable' (see the module docstring)."""
    backends = CASES.get(name, (2, [], "cpu,gpu"))[2]
    if "cpu" not in backends:
        return "gpu"
    if STATIC.search(text):
        return "static"
    return "runnable"


def first_error(output):
    """The first exception line of a failed run's output (rank logs and launcher output)."""
    lines = [line.strip() for line in output.splitlines()]
    for i, line in enumerate(lines):
        if line.startswith("Traceback"):
            for j in range(i + 1, len(lines)):
                if ERROR_LINE.match(lines[j]) and not lines[j].startswith("File "):
                    detail = [x for x in lines[j + 1:j + 6] if x and not x.startswith("[")]
                    return " | ".join([lines[j]] + detail)[:300] if lines[j].endswith(":") else lines[j][:300]
    for line in lines:
        if ERROR_LINE.match(line.strip()):
            return line.strip()[:300]
    return (lines[-1] if lines else "no output")[:300]


def run_case(workdir, script, ranks, env_case, launcher, timeout):
    """(passed, seconds, first error line) of one script run on `ranks` ranks."""
    env = dict(os.environ, backend="cpu", **env_case)
    env["PYTHONPATH"] = os.pathsep.join([ROOT, workdir, env.get("PYTHONPATH", "")])
    env.setdefault("OMP_NUM_THREADS", "1")
    env["GLOG_v"] = "0"
    log_dir = tempfile.mkdtemp(prefix="log_", dir=workdir)
    cmd = [sys.executable, "-m", launcher, "--nproc_per_node", str(ranks), "--log_dir", log_dir, script]
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout,
                           start_new_session=True)
        rc, output = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, output = None, f"TimeoutError: over {timeout} s\n" + str(e.stdout or "")[-500:]
    logs = "".join(open(f, errors="replace").read() for f in sorted(glob.glob(os.path.join(log_dir, "*"))))
    secs = time.perf_counter() - t
    if rc == 0:
        return True, secs, ""
    return False, secs, ("TimeoutError: over %d s" % timeout) if rc is None else first_error(logs + "\n" + output)


def prepare(src, real):
    """A scratch copy of DIR: the scripts rewritten to globaltensor.paddle (or left as they are)."""
    work = tempfile.mkdtemp(prefix="paddle_real_" if real else "paddle_gt_")
    for path in glob.glob(os.path.join(src, "*.py")):
        with open(path) as f:
            text = f.read()
        with open(os.path.join(work, os.path.basename(path)), "w") as f:
            f.write(text if real else rewrite(text))
    return work


def run_all(src, names, launcher, real, timeout):
    """{script: {"passed", "cases": [...], "error"}} for one side."""
    work = prepare(src, real)
    results = {}
    try:
        for name in names:
            ranks, cases, _ = CASES.get(name, (2, [BASIC], "unknown"))
            runs = []
            for case in cases:
                ok, secs, err = run_case(work, name, ranks, case, launcher, timeout)
                runs.append({"env": case, "passed": ok, "seconds": round(secs, 1), "error": err})
                print(f"  {'real' if real else 'ours'} {name} {case}: {'pass' if ok else 'FAIL ' + err}",
                      flush=True)
            errors = [r["error"] for r in runs if not r["passed"]]
            results[name] = {"passed": not errors, "cases": runs, "error": errors[0] if errors else ""}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--paddle-tests", help="directory of Paddle's test scripts")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per run")
    ap.add_argument("--real-paddle", action="store_true", help="also run them under real Paddle")
    ap.add_argument("--only", default="", help="only scripts whose name contains this")
    ap.add_argument("--from-json", help="print the table of an earlier run's JSON (runs nothing)")
    ap.add_argument("--json", default=os.path.join(ROOT, "benchmarks", "results", "fidelity_paddle.json"))
    args = ap.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            old = json.load(f)["scripts"]
        names = sorted(old)
        real = {n: old[n]["real_paddle"] for n in names if old[n]["real_paddle"]}
        args.json = args.from_json
        return report(names, {n: old[n]["class"] for n in names}, {n: old[n]["ours"] for n in names}, real, args)
    if not args.paddle_tests:
        ap.error("--paddle-tests DIR is needed")
    src = os.path.abspath(args.paddle_tests)
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(src, "*.py"))
                   if re.match(r"(semi_auto_parallel_|reshard_)", os.path.basename(p))
                   and os.path.basename(p) not in HELPERS and args.only in os.path.basename(p))
    classes = {}
    for name in names:
        text = open(os.path.join(src, name)).read()
        helpers = [h for h in HELPERS if h[:-3] in text and os.path.exists(os.path.join(src, h))]
        classes[name] = classify(name, text + "".join(open(os.path.join(src, h)).read() for h in helpers))
    ours = run_all(src, names, "globaltensor.paddle.distributed.launch", False, args.timeout)
    real = run_all(src, names, "paddle.distributed.launch", True, args.timeout) if args.real_paddle else {}
    report(names, classes, ours, real, args)


def report(names, classes, ours, real, args):
    """Print the table and totals; write the JSON."""
    print(f"\n{'script':48} {'class':9} {'ours':5} {'paddle':6} first error (ours)")
    for name in names:
        theirs = ("pass" if real[name]["passed"] else "FAIL") if name in real else "-"
        print(f"{name:48} {classes[name]:9} {'pass' if ours[name]['passed'] else 'FAIL':5} {theirs:6} "
              f"{ours[name]['error'][:110]}")
    runnable = [n for n in names if classes[n] == "runnable"]
    totals = {"total": len(names), "runnable": len(runnable),
              "passed_runnable": sum(ours[n]["passed"] for n in runnable),
              "passed_all": sum(ours[n]["passed"] for n in names),
              "by_class": {c: sum(classes[n] == c for n in names) for c in ("runnable", "gpu", "static")}}
    if real:
        meaningful = [n for n in names if real[n]["passed"]]
        totals.update(real_paddle_passed=len(meaningful),
                      passed_where_real_paddle_passes=sum(ours[n]["passed"] for n in meaningful),
                      passed_where_real_paddle_fails=sum(ours[n]["passed"] for n in names if n not in meaningful))
    print(f"\npassed {totals['passed_runnable']} / runnable {totals['runnable']} / total {totals['total']} "
          f"(passed of all, any class: {totals['passed_all']})")
    if real:
        print(f"real Paddle {_paddle_version()} on CPU (gloo) passes {totals['real_paddle_passed']}; ours passes "
              f"{totals['passed_where_real_paddle_passes']} of those, and "
              f"{totals['passed_where_real_paddle_fails']} that real Paddle fails on CPU")
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"totals": totals, "timeout_s": args.timeout,
                   "scripts": {n: {"class": classes[n], "ours": ours[n], "real_paddle": real.get(n)}
                               for n in names}}, f, indent=1)
    print(f"wrote {args.json}")


def _paddle_version():
    try:
        import paddle
        return paddle.__version__
    except ImportError:
        return "?"


if __name__ == "__main__":
    main()
