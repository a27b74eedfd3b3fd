"""A process of tests/ps/test_static_ps.py's real parameter-server job: `server I`, `trainer T` or `one`
(one process on the joined batch). Prints JSON: the dense parameters and (sync) the touched rows after 5
steps. PS_MODE: sync (default), async or geo (k_steps 2)."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_static_ps import STEPS, _batch, _build, _touched  # noqa: E402


def main(role, index):
    import globaltensor.paddle as paddle
    from globaltensor.paddle.static import ps
    paddle.enable_static()
    program, loss, exe = _build(paddle)
    servers = os.environ["PS_SERVERS"].split(",")
    mode = os.environ.get("PS_MODE", "sync")
    job = ps.job_spec(program, program.minimized[0][1], mode, k_steps=2 if mode == "geo" else 0, servers=servers,
                      trainers=2, min_block_size=16, secret=bytes.fromhex(os.environ["GLOBALTENSOR_SECRET"]),
                      timeout=30.0, dead_after=10.0)
    batches = [_batch(s) for s in range(STEPS)]
    if role == "server":
        from globaltensor.ps.server import Server
        Server(job, index, initial=ps.initial_values(program)).serve()
        return
    touched = _touched(batches)
    if role == "one":
        for feed in batches:
            exe.run(program, feed=feed, fetch_list=[loss])
        rows = program.sparse_tables["emb"].local.pull(touched)
    else:
        from globaltensor.ps.client import Client
        client = Client(job, index).connect()
        ps.attach(program, client)
        for feed in batches:
            exe.run(program, feed={k: v[index * 4:(index + 1) * 4] for k, v in feed.items()}, fetch_list=[loss])
        rows = client.pull_sparse("emb", touched, is_test=True) if mode == "sync" else np.zeros(0)
        exe.close()  # async / GEO: a barrier of the trainers, then the servers' final values; then stop
        client.close()
    out = {p.name: np.asarray(p._local).tolist() for p in program.parameters}
    out["emb"] = np.asarray(rows).tolist()
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0)
