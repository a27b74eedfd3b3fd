"""Entry point of one spawned rank: load fn and args, run, write the result or the traceback."""
import os
import pickle
import sys
import traceback


def main(payload, result_path):
    with open(payload, "rb") as f:
        path, blob = pickle.load(f)
    sys.path[:0] = [p for p in path if p not in sys.path]
    import cloudpickle

    try:
        fn, args = cloudpickle.loads(blob)
        value = fn(*args)
        record = ("ok", value)
    except BaseException as exc:
        from globaltensor.distributed.world import note_failure
        note_failure(exc)  # peers still waiting for this rank read how it ended
        text = traceback.format_exc()
        sys.stderr.write(text)
        sys.stderr.flush()
        _write(result_path, pickle.dumps(("error", text)))
        sys.exit(1)
    _write(result_path, cloudpickle.dumps(record))


def _write(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


if __name__ == "__main__":
    if sys.argv[1] == "--fork-server":  # spawn's fork server: each child returns here with its own argv
        from globaltensor.distributed._fork_server import exit_now, serve
        argv = serve(int(sys.argv[2]))
        if argv is not None:
            with exit_now():
                main(*argv)
    else:
        main(sys.argv[1], sys.argv[2])
