"""Rank the causes of failure in a fidelity run's JSON: the tests each cause blocks, an example, a one-line repro."""
import argparse
import json
import re

RULES = [  # (pattern on the first error line, cause, repro); \1.. are the pattern's groups
    (r"module 'globaltensor' has no attribute '(\w+)'", r"missing flow.\1",
     r"python -c 'import globaltensor as flow; flow.\1'"),
    (r"module 'globaltensor\.([\w.]+)' has no attribute '(\w+)'", r"missing flow.\1.\2",
     r"python -c 'import globaltensor as flow; flow.\1.\2'"),
    (r"'(Tensor|Parameter)' object has no attribute '(\w+)'", r"missing Tensor.\2",
     r"python -c 'import globaltensor as flow; flow.ones(2).\2'"),
    (r"type object '(\w+)' has no attribute '(\w+)'", r"missing \1.\2", ""),
    (r"'(\w+)' object has no attribute '(\w+)'", r"missing \1.\2", ""),
    (r"(\w+)\(\) got an unexpected keyword argument '(\w+)'", r"\1(\2=...) not accepted", ""),
    (r"No module named '([\w.]+)'", r"missing module \1", r"python -c 'import \1'"),
    (r"cannot import name '(\w+)' from '([\w.]+)'", r"missing \2.\1", r"python -c 'from \2 import \1'"),
    (r"the test ran past (\d+) s", "test ran past the per-test limit", ""),
]


def cause_of(error, expects=[]):
    """(cause, repro) for one first error line (and the exception classes the test asserts); unknown lines keep
    their exception class and a shortened message."""
    text, _, where = (error[len("import: "):] if error.startswith("import: ") else error).partition(" @ ")
    raised = re.match(r"(\w+(Error|Exception)): ", text)
    if raised and expects and raised.group(1) not in expects + ["AssertionError"] and not re.search(r"has no attribute|unexpected keyword", text):
        return f"raises {raised.group(1)} where OneFlow raises {'/'.join(expects)}", ""
    if re.match(r"AssertionError: (False is not true|unexpectedly None|.* not found in )", text) and \
            re.search(r"exception|context|ctx", where):
        return "error message text differs from OneFlow's (assert on str(exception))", ""
    m = re.match(r"AssertionError: (\w+) not raised", text)
    if m:
        return f"no {m.group(1)} where OneFlow raises one (a check missing)", ""
    for pattern, cause, repro in RULES:
        m = re.search(pattern, text)
        if m:
            return m.expand(cause), m.expand(repro) if repro else ""
    short = re.sub(r"\d+(\.\d+)?", "N", text)
    short = re.sub(r"tensor\(\[.*", "tensor(...)", short)
    return short[:110], ""


def rank(report):
    """[{cause, tests, files, import_time, example, error, repro}] over the tests that failed, errored or timed out."""
    causes = {}
    for test_id, info in report["tests"].items():
        if info["status"] in ("passed", "skipped") or info["gpu"] or info["disabled"]:
            continue
        cause, repro = cause_of(info["error"], list(info.get("expects", []))) if info["error"] else (info["status"], "")
        c = causes.setdefault(cause, {"cause": cause, "tests": 0, "files": set(), "import_time": 0,
                                      "example": test_id, "error": info["error"][:200], "repro": repro})
        c["tests"] += 1
        c["files"].add(info["file"])
        c["import_time"] += info["error"].startswith("import: ")
    ranked = sorted(causes.values(), key=lambda c: (-c["tests"], c["cause"]))
    for c in ranked:
        c["files"] = len(c["files"])
    return ranked


def area(test_id):
    """tensor/, exceptions/, modules/test_global_*, or the module file for the other selected files."""
    folder, _, rest = test_id.partition("__")
    if folder != "modules":
        return folder + "/"
    return "modules/test_global_*" if rest.startswith("test_global_") else "modules/" + rest.split(".py")[0]


def by_area(report):
    """{area: {passed, runnable, total, needs_gpu, disabled_in_oneflow}}."""
    areas = {}
    for test_id, info in report["tests"].items():
        a = areas.setdefault(area(test_id), dict.fromkeys(("passed", "runnable", "total", "needs_gpu",
                                                             "disabled_in_oneflow"), 0))
        a["total"] += 1
        if info["status"] == "passed":
            a["passed"] += 1
        if info["status"] != "passed" and info["gpu"]:
            a["needs_gpu"] += 1
        elif info["status"] != "passed" and info["disabled"]:
            a["disabled_in_oneflow"] += 1
        else:
            a["runnable"] += 1
    return dict(sorted(areas.items()))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("json", help="the harness's JSON (benchmarks/results/fidelity_oneflow.json)")
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--write", action="store_true", help="store the ranking in the JSON under 'causes'")
    args = p.parse_args(argv)
    report = json.load(open(args.json))
    ranked = rank(report)
    print(f"{'area':34s} passed runnable total needs_gpu off_in_oneflow")
    for name, a in by_area(report).items():
        print(f"{name:34s} {a['passed']:6d} {a['runnable']:8d} {a['total']:5d} {a['needs_gpu']:9d} "
              f"{a['disabled_in_oneflow']:14d}")
    for i, c in enumerate(ranked[:args.top], 1):
        where = f"{c['tests']} tests, {c['files']} files" + (f", {c['import_time']} at import" if c["import_time"] else "")
        print(f"{i:2d}. {c['cause']}  [{where}]\n    e.g. {c['example']}: {c['error'][:150]}"
              + (f"\n    repro: {c['repro']}" if c["repro"] else ""))
    if args.write:
        report["causes"], report["areas"] = ranked, by_area(report)
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
