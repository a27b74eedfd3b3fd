"""Role makers and Fleet's PS queries: Paddle's environment contract read and checked, UserDefinedRoleMaker, strategy modes."""
import pytest

from globaltensor.paddle.distributed import fleet
from globaltensor.paddle.distributed.fleet import Role
from globaltensor.paddle.distributed.fleet import ps_runtime

SERVERS = "127.0.0.1:6170,127.0.0.1:6171"
CONTRACT = ("TRAINING_ROLE", "PADDLE_ROLE", "PADDLE_PSERVERS_IP_PORT_LIST", "PADDLE_TRAINER_ENDPOINTS",
            "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ID", "POD_IP", "PADDLE_PORT")


@pytest.fixture
def env(monkeypatch):
    for k in CONTRACT:
        monkeypatch.delenv(k, raising=False)
    yield monkeypatch
    ps_runtime.start(None, None)


def trainer_env(env, trainer_id="1"):
    env.setenv("TRAINING_ROLE", "TRAINER")
    env.setenv("PADDLE_PSERVERS_IP_PORT_LIST", SERVERS)
    env.setenv("PADDLE_TRAINER_ENDPOINTS", "127.0.0.1:6180,127.0.0.1:6181")
    env.setenv("PADDLE_TRAINERS_NUM", "2")
    env.setenv("PADDLE_TRAINER_ID", trainer_id)


def test_trainer_from_the_environment(env):
    trainer_env(env)
    fleet.init(fleet.PaddleCloudRoleMaker())
    assert (fleet.is_worker(), fleet.is_server(), fleet.is_first_worker()) == (True, False, False)
    assert (fleet.worker_index(), fleet.worker_num(), fleet.server_num(), fleet.server_index()) == (1, 2, 2, -1)
    assert fleet.server_endpoints() == SERVERS.split(",") and fleet.server_endpoints(to_string=True) == SERVERS
    assert fleet.worker_endpoints(to_string=True) == "127.0.0.1:6180,127.0.0.1:6181"


def test_server_from_the_environment_and_fleet_init_without_a_role_maker(env):
    env.setenv("TRAINING_ROLE", "PSERVER")
    env.setenv("PADDLE_PSERVERS_IP_PORT_LIST", SERVERS)
    env.setenv("PADDLE_TRAINERS_NUM", "3")
    env.setenv("POD_IP", "127.0.0.1")
    env.setenv("PADDLE_PORT", "6171")
    fleet.init()  # TRAINING_ROLE set: a PS job, as Paddle's fleet.init() reads it
    assert (fleet.is_server(), fleet.is_worker(), fleet.server_index(), fleet.worker_num()) == (True, False, 1, 3)
    assert fleet.worker_index() == -1 and not fleet.is_first_worker()


@pytest.mark.parametrize("given, missing", [
    ({}, "missing TRAINING_ROLE, PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_TRAINERS_NUM"),
    ({"TRAINING_ROLE": "TRAINER", "PADDLE_PSERVERS_IP_PORT_LIST": SERVERS, "PADDLE_TRAINERS_NUM": "2"},
     "missing PADDLE_TRAINER_ID"),
    ({"TRAINING_ROLE": "PSERVER", "PADDLE_TRAINERS_NUM": "2", "POD_IP": "127.0.0.1"},
     "missing PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_PORT"),
])
def test_incomplete_environment_names_what_is_missing(env, given, missing):
    """Paddle silently runs one worker here; a PS job that half-started must not."""
    for k, v in given.items():
        env.setenv(k, v)
    with pytest.raises(ValueError, match=missing) as info:
        fleet.PaddleCloudRoleMaker()
    assert "globaltensor.paddle.distributed.launch --server_num" in str(info.value)


@pytest.mark.parametrize("key, value, message", [
    ("PADDLE_TRAINER_ID", "2", r"trainer id 2 outside \[0, 2\)"),
    ("PADDLE_TRAINERS_NUM", "two", "PADDLE_TRAINERS_NUM='two' is not an integer"),
    ("PADDLE_TRAINERS_NUM", "3", "3 trainers, but 2 trainer endpoints"),
    ("TRAINING_ROLE", "HETER_TRAINER", "must be TRAINER or PSERVER"),
])
def test_inconsistent_environment_is_refused(env, key, value, message):
    trainer_env(env)
    env.setenv(key, value)
    with pytest.raises(ValueError, match=message):
        fleet.PaddleCloudRoleMaker()


def test_server_endpoint_must_be_listed(env):
    env.setenv("TRAINING_ROLE", "PSERVER")
    env.setenv("PADDLE_PSERVERS_IP_PORT_LIST", SERVERS)
    env.setenv("PADDLE_TRAINERS_NUM", "2")
    env.setenv("POD_IP", "127.0.0.1")
    env.setenv("PADDLE_PORT", "7000")
    with pytest.raises(ValueError, match="127.0.0.1:7000 is not in PADDLE_PSERVERS_IP_PORT_LIST"):
        fleet.PaddleCloudRoleMaker()


def test_user_defined_role_maker(env):
    role = fleet.UserDefinedRoleMaker(current_id=0, role=Role.SERVER, worker_num=2,
                                      server_endpoints=SERVERS.split(","))
    fleet.init(role)
    assert (fleet.is_server(), fleet.server_index(), fleet.worker_num(), fleet.server_num()) == (True, 0, 2, 2)
    fleet.init(fleet.UserDefinedRoleMaker(current_id=1, role=Role.WORKER, worker_num=2,
                                          server_endpoints=SERVERS.split(",")))
    assert (fleet.is_worker(), fleet.worker_index(), fleet.is_first_worker()) == (True, 1, False)
    with pytest.raises(ValueError, match="needs server_endpoints"):
        fleet.UserDefinedRoleMaker(current_id=0, role=Role.WORKER, worker_num=2)
    with pytest.raises(ValueError, match=r"server index 2 outside \[0, 2\)"):
        fleet.UserDefinedRoleMaker(current_id=2, role=Role.SERVER, worker_num=2, server_endpoints=SERVERS)
    with pytest.raises(ValueError, match="worker_num must be a positive int"):
        fleet.UserDefinedRoleMaker(current_id=0, role=Role.WORKER, server_endpoints=SERVERS)


def test_strategy_modes():
    s = fleet.DistributedStrategy()
    assert s.a_sync is True and s.ps_mode() == ("async", 0)  # Paddle's default
    s.a_sync_configs = {"k_steps": 0}
    assert s.ps_mode() == ("async", 0)
    s.a_sync_configs = {"k_steps": 100}
    assert s.ps_mode() == ("geo", 100) and s.a_sync_configs["send_queue_size"] == 16
    s.a_sync = False
    assert s.ps_mode() == ("sync", 0)
    with pytest.raises(ValueError, match="unknown key"):
        s.a_sync_configs = {"k_step": 3}
    with pytest.raises(ValueError, match="k_steps'] must be an int"):
        s.a_sync_configs = {"k_steps": 1.5}
    with pytest.raises(TypeError, match="a_sync must be a bool"):
        s.a_sync = "yes"


def test_lifecycle_calls_in_the_wrong_role_or_order_say_so(env):
    fleet.init(fleet.UserDefinedRoleMaker(current_id=0, role=Role.WORKER, worker_num=1, server_endpoints=SERVERS))
    with pytest.raises(RuntimeError, match="is for servers; this process is trainer 0"):
        fleet.run_server()
    with pytest.raises(RuntimeError, match="minimize"):
        fleet.init_worker()
    with pytest.raises(RuntimeError, match="call fleet.init_worker"):
        fleet.stop_worker()
    fleet.init(fleet.UserDefinedRoleMaker(current_id=0, role=Role.SERVER, worker_num=1, server_endpoints=SERVERS))
    with pytest.raises(RuntimeError, match="is for trainers; this process is server 0"):
        fleet.init_worker()
    with pytest.raises(RuntimeError, match="call fleet.init_server"):
        fleet.run_server()
