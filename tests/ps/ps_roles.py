"""A PS job's process for the launcher tests: python ps_roles.py OUTDIR MODE (a plain pyzmq job, no engine).

Each process writes OUTDIR/<role><index>.json (its PS variables, pid, fleet's answers when MODE
uses fleet), then: zmq -- servers answer hellos and return once every trainer sent stop (a pyzmq
job of its own, independent of globaltensor.ps); fail -- trainer 1 exits 3, the others sleep;
server_fail -- server 0 raises, the others sleep; no_stop -- trainers end at once, servers sleep.
"""
import json
import os
import sys
import time

KEYS = ("TRAINING_ROLE", "PADDLE_ROLE", "PADDLE_PSERVERS_IP_PORT_LIST", "PADDLE_TRAINER_ENDPOINTS",
        "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ID", "PADDLE_PSERVER_ID", "POD_IP", "PADDLE_PORT",
        "PADDLE_CURRENT_ENDPOINT", "GLOBALTENSOR_SECRET", "GLOBALTENSOR_JOB_ID", "OMP_NUM_THREADS", "RANK")


def report(outdir, extra=None):
    server = os.environ["TRAINING_ROLE"] == "PSERVER"
    index = os.environ["PADDLE_PSERVER_ID" if server else "PADDLE_TRAINER_ID"]
    info = {k: os.environ.get(k) for k in KEYS}
    info.update(pid=os.getpid(), **(extra or {}))
    path = os.path.join(outdir, f"{'server' if server else 'trainer'}{index}.json")
    with open(path + ".tmp", "w") as f:  # then renamed: a process stopped mid-write leaves no half report
        json.dump(info, f)
    os.replace(path + ".tmp", path)
    return server, int(index)


def fleet_answers():
    from globaltensor.paddle.distributed import fleet
    fleet.init(fleet.PaddleCloudRoleMaker())
    return {"is_server": fleet.is_server(), "is_worker": fleet.is_worker(), "server_index": fleet.server_index(),
            "worker_index": fleet.worker_index(), "worker_num": fleet.worker_num(), "server_num": fleet.server_num(),
            "servers": fleet.server_endpoints(), "is_first_worker": fleet.is_first_worker()}


def serve(trainers, limit=30.0):
    import zmq
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.bind(f"tcp://{os.environ['POD_IP']}:{os.environ['PADDLE_PORT']}")
    stopped, deadline = set(), time.monotonic() + limit
    while len(stopped) < trainers:
        if not sock.poll(int(max(0.0, deadline - time.monotonic()) * 1000)):
            raise TimeoutError(f"server: trainers {sorted(set(range(trainers)) - stopped)} never stopped")
        ident, msg = sock.recv_multipart()
        op, who = msg.decode().split()
        if op == "stop":
            stopped.add(int(who))
        sock.send_multipart([ident, f"ok {op} {who}".encode()])
    sock.close(linger=1000)
    ctx.term()


def train(trainer_id, limit=30.0):
    import zmq
    ctx = zmq.Context()
    socks = []
    for ep in os.environ["PADDLE_PSERVERS_IP_PORT_LIST"].split(","):
        s = ctx.socket(zmq.DEALER)
        s.connect(f"tcp://{ep}")
        socks.append((ep, s))
    for op in ("hello", "stop"):
        for ep, s in socks:
            s.send(f"{op} {trainer_id}".encode())
            if not s.poll(int(limit * 1000)):
                raise TimeoutError(f"trainer {trainer_id}: server {ep} did not answer {op}")
            assert s.recv() == f"ok {op} {trainer_id}".encode()
    print(f"trainer {trainer_id} talked to {len(socks)} servers", flush=True)
    for _, s in socks:
        s.close(linger=1000)
    ctx.term()


def main(outdir, mode):
    extra = fleet_answers() if mode == "zmq_fleet" else {}
    server, index = report(outdir, extra)
    trainers = int(os.environ["PADDLE_TRAINERS_NUM"])
    if mode in ("zmq", "zmq_fleet"):
        serve(trainers) if server else train(index)
    elif mode == "fail" and not server and index == 1:
        print("trainer 1 about to fail", file=sys.stderr, flush=True)
        sys.exit(3)
    elif mode == "server_fail" and server and index == 0:
        raise RuntimeError("server 0 broke")
    elif mode == "no_stop" and not server:
        return
    else:
        time.sleep(60)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
