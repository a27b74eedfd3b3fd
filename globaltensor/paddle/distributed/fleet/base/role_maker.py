"""Role makers: which process of the job this is (collective rank, or PS server / trainer) and its peers."""
import os

from .....env import get_rank, get_world_size


class Role:
    WORKER, SERVER, HETER_WORKER, ALL, COORDINATOR = 1, 2, 3, 4, 5


_PS_CONTRACT = ("TRAINING_ROLE", "PADDLE_PSERVERS_IP_PORT_LIST", "PADDLE_TRAINERS_NUM")
_LAUNCH_HINT = ("start the job with `python -m globaltensor.paddle.distributed.launch --server_num=1 --worker_num=2 "
                "train.py`, or pass fleet.UserDefinedRoleMaker(...)")


def _endpoints(value):
    if isinstance(value, str):
        value = value.split(",")
    return [e.strip() for e in (value or []) if e and e.strip()]


def _int_env(env, name):
    text = env[name]
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"PaddleCloudRoleMaker: {name}={text!r} is not an integer") from None


class _PSRole:
    """A PS job's facts, checked: role, this process's index in its role, every endpoint."""

    def __init__(self, role, current_id, worker_num, server_endpoints, worker_endpoints=(), where="role maker"):
        if role not in (Role.WORKER, Role.SERVER):
            raise ValueError(f"{where}: role must be Role.WORKER or Role.SERVER, got {role!r}")
        self.server_endpoints = _endpoints(server_endpoints)
        self.worker_endpoints = _endpoints(worker_endpoints)
        if not self.server_endpoints:
            raise ValueError(f"{where}: a parameter-server job needs at least one server endpoint")
        if not isinstance(worker_num, int) or worker_num < 1:
            raise ValueError(f"{where}: worker_num must be a positive int, got {worker_num!r}")
        if self.worker_endpoints and len(self.worker_endpoints) != worker_num:
            raise ValueError(f"{where}: {worker_num} trainers, but {len(self.worker_endpoints)} trainer endpoints "
                             f"{self.worker_endpoints}")
        count = worker_num if role == Role.WORKER else len(self.server_endpoints)
        if not isinstance(current_id, int) or not 0 <= current_id < count:
            what = "trainer id" if role == Role.WORKER else "server index"
            raise ValueError(f"{where}: {what} {current_id!r} outside [0, {count})")
        self.role, self.current_id, self.worker_num = role, current_id, worker_num

    @property
    def current_endpoint(self):
        if self.role == Role.SERVER:
            return self.server_endpoints[self.current_id]
        return self.worker_endpoints[self.current_id] if self.worker_endpoints else ""


def _ps_role_from_env(env):
    """The PS contract the launcher sets; ValueError naming every missing variable."""
    missing = [k for k in _PS_CONTRACT if not env.get(k)]
    role_name = env.get("TRAINING_ROLE")
    if role_name and role_name not in ("TRAINER", "PSERVER"):
        raise ValueError(f"PaddleCloudRoleMaker: TRAINING_ROLE={role_name!r}; it must be TRAINER or PSERVER "
                         f"(heter trainers and coordinators are not supported)")
    missing += [k for k in (("PADDLE_TRAINER_ID",) if role_name == "TRAINER" else ("POD_IP", "PADDLE_PORT")
                            if role_name == "PSERVER" else ()) if not env.get(k)]
    if missing:
        raise ValueError(f"PaddleCloudRoleMaker(is_collective=False): the parameter-server environment is incomplete, "
                         f"missing {', '.join(missing)}; {_LAUNCH_HINT}")
    servers = _endpoints(env["PADDLE_PSERVERS_IP_PORT_LIST"])
    worker_num = _int_env(env, "PADDLE_TRAINERS_NUM")
    if role_name == "TRAINER":
        role, current = Role.WORKER, _int_env(env, "PADDLE_TRAINER_ID")
    else:
        role, mine = Role.SERVER, f"{env['POD_IP']}:{env['PADDLE_PORT']}"
        if mine not in servers:
            raise ValueError(f"PaddleCloudRoleMaker: this server's endpoint POD_IP:PADDLE_PORT = {mine} is not in "
                             f"PADDLE_PSERVERS_IP_PORT_LIST {servers}")
        current = servers.index(mine)
    return _PSRole(role, current, worker_num, servers, env.get("PADDLE_TRAINER_ENDPOINTS", ""),
                   where="PaddleCloudRoleMaker")


class PaddleCloudRoleMaker:
    """Reads the job from the launcher's variables: collective ranks (is_collective=True) or a
    parameter-server job (Paddle's PS contract, checked: an incomplete one raises naming what is missing)."""

    def __init__(self, is_collective=False, **kwargs):
        self.is_collective = bool(is_collective)
        self._kwargs = kwargs
        self._ps = None if self.is_collective else self._make_ps()

    def _make_ps(self):
        return _ps_role_from_env(os.environ)

    def _is_collective(self):
        return self.is_collective

    def _is_worker(self):
        return self._ps is None or self._ps.role == Role.WORKER

    def _is_server(self):
        return self._ps is not None and self._ps.role == Role.SERVER

    def _is_first_worker(self):
        return self._is_worker() and self._worker_index() == 0

    def _worker_index(self):
        if self._ps is None:
            return get_rank()
        return self._ps.current_id if self._ps.role == Role.WORKER else -1

    def _server_index(self):
        return self._ps.current_id if self._is_server() else -1

    def _role_id(self):
        return self._ps.current_id if self._ps is not None else get_rank()

    def _worker_num(self):
        return get_world_size() if self._ps is None else self._ps.worker_num

    def _server_num(self):
        return 0 if self._ps is None else len(self._ps.server_endpoints)

    def _get_pserver_endpoints(self):
        return [] if self._ps is None else list(self._ps.server_endpoints)

    def _get_trainer_endpoints(self):
        if self._ps is None:
            found = os.environ.get("PADDLE_TRAINER_ENDPOINTS", "")
            return _endpoints(found) or ["127.0.0.1:0"] * get_world_size()
        return list(self._ps.worker_endpoints)

    def _get_current_endpoint(self):
        if self._ps is None:
            return os.environ.get("PADDLE_CURRENT_ENDPOINT", "")
        return self._ps.current_endpoint

    def to_string(self):
        if self._ps is None:
            return f"role: collective worker, rank: {get_rank()} of {get_world_size()}"
        kind = "server" if self._is_server() else "worker"
        return (f"role: {kind}, current_id: {self._ps.current_id}, servers: {self._ps.server_endpoints}, "
                f"worker_num: {self._ps.worker_num}")


class UserDefinedRoleMaker(PaddleCloudRoleMaker):
    """The job given explicitly. Parameter server (is_collective=False): current_id, role, worker_num,
    server_endpoints (and worker_endpoints); collective: it must agree with the launcher's ranks."""

    def __init__(self, is_collective=False, init_gloo=False, current_id=0, role=Role.WORKER, worker_num=0,
                 worker_endpoints=None, server_endpoints=None, **kwargs):
        self._given = dict(current_id=current_id, role=role, worker_num=worker_num,
                           worker_endpoints=worker_endpoints, server_endpoints=server_endpoints)
        super().__init__(is_collective=is_collective, **kwargs)
        if self.is_collective:
            worker_num = worker_num or len(_endpoints(worker_endpoints)) or 1
            if current_id != get_rank() or worker_num != get_world_size():
                raise ValueError(f"UserDefinedRoleMaker(current_id={current_id}, worker_num={worker_num}) disagrees "
                                 f"with the job: rank {get_rank()} of {get_world_size()}")

    def _make_ps(self):
        g = self._given
        if not _endpoints(g["server_endpoints"]):
            raise ValueError("UserDefinedRoleMaker: a parameter-server job needs server_endpoints=[ip:port, ...] "
                             "(or is_collective=True for collective training)")
        worker_num = g["worker_num"] or len(_endpoints(g["worker_endpoints"]))
        return _PSRole(g["role"], g["current_id"], worker_num, g["server_endpoints"], g["worker_endpoints"] or (),
                       where="UserDefinedRoleMaker")
