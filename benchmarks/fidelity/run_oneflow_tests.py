"""Run OneFlow's global-tensor tests against globaltensor with only their imports changed, and count what passes (issue 28's fidelity figure)."""
import argparse
import concurrent.futures
import datetime
import glob
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from _static import tests_of  # noqa: E402

# issue 28's selection, relative to python/oneflow/test
SELECTION = ["tensor/test_*.py", "modules/test_global_*.py", "exceptions/test_*.py", "modules/test_eager_boxing*.py",
             "modules/test_comm_ops.py", "modules/test_ddp*.py", "modules/test_save_load.py"]
SIBLING = re.compile(r"^\s*from (test_\w+) import", re.M)


def rewrite_line(line):
    """One source line with OneFlow imports turned into globaltensor's (and oneflow.test_utils into the copy)."""
    m = re.match(r"(\s*)(from|import)\s+(oneflow\b[\w.]*)(.*)$", line)
    if not m:
        return line
    indent, kind, module, rest = m.groups()
    if module.startswith("oneflow.test_utils"):
        return f"{indent}{kind} {module[len('oneflow.'):]}{rest}"
    target = "globaltensor" + module[len("oneflow"):]
    if kind == "from":
        return f"{indent}from {target}{rest}"
    if rest.lstrip().startswith("as "):
        return f"{indent}import {target}{rest}"
    if module == "oneflow":
        return f"{indent}import globaltensor as oneflow{rest}"
    return f"{indent}import {target}; import globaltensor as oneflow{rest}"  # `import oneflow.x` binds oneflow


def rewrite(text):
    return "\n".join(rewrite_line(line) for line in text.split("\n"))


def copy_rewritten(src, dst):
    with open(src) as f, open(dst, "w") as g:
        g.write(rewrite(f.read()))


def prepare_support(oneflow_dir, work):
    """OneFlow's test_utils, imports rewritten, as the package `test_utils` under work/."""
    for folder, _, files in os.walk(os.path.join(oneflow_dir, "test_utils")):
        rel = os.path.relpath(folder, oneflow_dir)
        os.makedirs(os.path.join(work, rel), exist_ok=True)
        for f in files:
            if f.endswith(".py"):
                copy_rewritten(os.path.join(folder, f), os.path.join(work, rel, f))


def selected_files(test_dir, patterns, only):
    files = sorted({p for pattern in patterns for p in glob.glob(os.path.join(test_dir, pattern))})
    rels = [os.path.relpath(p, test_dir) for p in files]
    return [r for r in rels if not only or any(o in r for o in only)]


def default_shape(source):
    """Tests without a skip_unless decorator run on 2 ranks in a file about global tensors (OneFlow's CI
    runs those multi-device), else on 1."""
    return (1, 2) if re.search(r"to_global|placement", source) else (1, 1)


def stage(rel, test_dir, flat):
    """Copy one selected file (rewritten) into the flat folder as <dir>__<name>; its static test list."""
    src = os.path.join(test_dir, rel)
    name = rel.replace("/", "__")
    source = open(src).read()
    copy_rewritten(src, os.path.join(flat, name))
    folder = os.path.dirname(src)
    helpers = {f[:-3] for f in os.listdir(folder) if f.endswith(".py") and not f.startswith("test_")}
    for sib in set(SIBLING.findall(source)) | helpers:  # `from test_nms import ...`, throw_error.py: files beside it
        if os.path.exists(os.path.join(folder, sib + ".py")):
            copy_rewritten(os.path.join(folder, sib + ".py"), os.path.join(flat, sib + ".py"))
    tests = tests_of(src, name)
    for t in tests:
        t["shape"] = tuple(t["shape"]) if t["shape"] else default_shape(source)
    return name, tests


def run_job(flat, names, shape, work, timeout, test_timeout, stubs=()):
    """Launch pytest over `names` on nodes*devices ranks: {test id: {rank file: last record}}, timed_out, wall, exit, log tail."""
    nodes, devices = shape
    out = tempfile.mkdtemp(prefix=f"out{nodes}n{devices}d_", dir=work)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONEFLOW_TEST_")}
    env.update(ONEFLOW_TEST_CPU_ONLY="1", ONEFLOW_TEST_NODE_NUM=str(nodes), ONEFLOW_TEST_DEVICE_NUM=str(devices),
               PYTHONPATH=os.pathsep.join([work, flat, REPO]), OMP_NUM_THREADS="1", PYTHONHASHSEED="0",
               GT_FIDELITY_STUBS=",".join(stubs))
    cmd = [sys.executable, "-m", "globaltensor.distributed.launch", "--nproc_per_node", str(nodes * devices),
           os.path.join(HERE, "_rank_runner.py"), out, str(test_timeout), *names]
    start = time.time()
    proc = subprocess.Popen(cmd, cwd=flat, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        log, timed_out = proc.communicate(timeout=timeout)[0], False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)  # the launcher's own session: it stops its ranks
        try:
            log = proc.communicate(timeout=15)[0]
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            log = proc.communicate()[0]
        timed_out = True
    records = {}
    for f in sorted(os.listdir(out)):
        with open(os.path.join(out, f)) as h:
            for line in h:
                r = json.loads(line)
                records.setdefault(r["test"], {})[f] = r
    tail = log.decode(errors="replace").strip().splitlines()[-3:]
    return records, timed_out, time.time() - start, proc.returncode, tail


def merge(per_rank, timed_out, rc):
    """One outcome from each rank's last record: a failing rank fails the test."""
    outcomes = list(per_rank.values())
    for bad in ("collect_error", "error", "failed"):
        for r in outcomes:
            if r["outcome"] == bad:
                where = f" @ {r['where']}" if r.get("where") else ""
                return ("error" if bad != "failed" else "failed"), r.get("error", "") + where
    if any(r["outcome"] == "started" for r in outcomes):
        return ("timeout" if timed_out else "crashed"), "ran past the job's timeout" if timed_out else \
            f"a rank died during the test (launcher exit {rc})"
    if all(r["outcome"] == "passed" for r in outcomes):
        return "passed", ""
    return "skipped", next((r.get("error", "") for r in outcomes if r["outcome"] == "skipped"), "")


def run_batch(batch, flat, work, timeout, test_timeout, stubs=()):
    """Run one job (shape, [(file, tests)]) and give each of its tests an outcome."""
    shape, members = batch
    names = [name for name, _ in members]
    records, timed_out, wall, rc, tail = run_job(flat, names, shape, work, timeout, test_timeout, stubs)
    job = {"shape": f"{shape[0]}n{shape[1]}d", "files": names, "wall_s": round(wall, 1), "timed_out": timed_out,
           "exit": rc, "log_tail": tail}
    results = {}
    for name, tests in members:
        collect = records.get(name, {})
        collect = next((r for r in collect.values() if r["outcome"] == "collect_error"), None)
        for t in tests:
            info = {"file": name, "shape": job["shape"], "gpu": t["gpu"], "disabled": t["disabled"],
                    "expects": t["expects"]}
            if t["id"] in records:
                info["status"], info["error"] = merge(records[t["id"]], timed_out, rc)
            elif collect:
                info["status"], info["error"] = "error", "import: " + collect.get("error", "")
            else:
                info["status"] = "timeout" if timed_out else "not_run"
                info["error"] = "the job ended before this test started" + (
                    " (timeout)" if timed_out else f" (exit {rc}): " + " | ".join(tail)[-200:])
            results[t["id"]] = info
    return job, results


def category(info):
    if info["status"] == "passed":
        return "passed"
    if info["gpu"]:
        return "needs_gpu"
    if info["disabled"]:
        return "disabled_in_oneflow"
    return info["status"]


def totals(tests):
    cats = {}
    for info in tests.values():
        c = category(info)
        cats[c] = cats.get(c, 0) + 1
    total = sum(cats.values())
    runnable = total - cats.get("needs_gpu", 0) - cats.get("disabled_in_oneflow", 0)
    return {"passed": cats.get("passed", 0), "runnable": runnable, "total": total, "by_category": cats}


def batches(staged, batch_size):
    """[(shape, [(file, its tests of that shape)])]: files grouped by job shape, batch_size files a job;
    tests OneFlow's CPU CI skips (GPU-only, switched off) are still run: they skip in a moment."""
    by_shape = {}
    for name, tests in staged:
        for shape in sorted({t["shape"] for t in tests}):
            by_shape.setdefault(shape, []).append((name, [t for t in tests if t["shape"] == shape]))
    return [(shape, files[i:i + batch_size]) for shape, files in sorted(by_shape.items())
            for i in range(0, len(files), batch_size)]


def machine():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--oneflow-src", required=True, help="a OneFlow checkout (or its python/oneflow folder)")
    p.add_argument("--only", nargs="*", default=[], help="run only files whose path contains one of these")
    p.add_argument("--timeout", type=float, default=900, help="seconds per job (a batch of files on one job shape)")
    p.add_argument("--test-timeout", type=int, default=60, help="seconds per test (SIGALRM in each rank)")
    p.add_argument("--batch", type=int, default=30, help="files per job")
    p.add_argument("--jobs", type=int, default=1, help="files run at once")
    p.add_argument("--probe", nargs="*", default=[], metavar="NAME",
                   help="diagnosis only, not the figure: stand-ins for these missing flow.NAMEs (e.g. complex64 "
                        "complex128, which OneFlow's test support reads at import) to see the next failures")
    p.add_argument("--json", default=os.path.join(REPO, "benchmarks", "results", "fidelity_oneflow.json"))
    p.add_argument("--work", default=None, help="folder for the rewritten copies (default a temp folder)")
    args = p.parse_args(argv)
    oneflow_dir = args.oneflow_src
    if os.path.isdir(os.path.join(oneflow_dir, "python", "oneflow")):
        oneflow_dir = os.path.join(oneflow_dir, "python", "oneflow")
    test_dir = os.path.join(oneflow_dir, "test")
    work = args.work or tempfile.mkdtemp(prefix="gt_fidelity_")
    prepare_support(oneflow_dir, work)
    rels = selected_files(test_dir, SELECTION, args.only)
    flat = os.path.join(work, "tests")
    os.makedirs(flat, exist_ok=True)
    staged = [stage(rel, test_dir, flat) for rel in rels]
    tests, jobs, start = {}, [], time.time()
    planned = batches(staged, args.batch)

    def report(complete):
        return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "machine": machine(), "command": " ".join(sys.argv), "wall_s": round(time.time() - start, 1),
                "complete": complete, "jobs_done": f"{len(jobs)}/{len(planned)}", "selection": SELECTION,
                "probe_stubs": args.probe, "files": len(rels), "totals": totals(tests), "jobs": jobs, "tests": tests}

    def write(rep):  # after every job: a run cut short still leaves what it measured
        if args.json:
            os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
            with open(args.json, "w") as f:
                json.dump(rep, f, indent=1)

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for job, results in pool.map(lambda b: run_batch(b, flat, work, args.timeout, args.test_timeout, args.probe),
                                     planned):
            jobs.append(job)
            tests.update(results)
            counts = totals(results)
            print(f"{job['shape']} {len(job['files']):3d} files {counts['passed']:4d}/{counts['runnable']:4d}/"
                  f"{counts['total']:4d} {job['wall_s']:6.1f}s{' TIMEOUT' if job['timed_out'] else ''}", flush=True)
            write(report(False))
    final = report(True)
    write(final)
    summary = final["totals"]
    print(f"passed {summary['passed']} / runnable {summary['runnable']} / total {summary['total']}: "
          f"{summary['by_category']}")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return final


if __name__ == "__main__":
    main()
