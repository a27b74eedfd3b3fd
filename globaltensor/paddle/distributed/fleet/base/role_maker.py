"""Role makers: collective training only (every process is a worker)."""
from .....env import get_rank, get_world_size


class Role:
    WORKER, SERVER, HETER_WORKER, ALL = 1, 2, 3, 4


class PaddleCloudRoleMaker:
    """Reads the job from the launcher's variables; collective only."""

    def __init__(self, is_collective=False, **kwargs):
        if not is_collective:
            raise NotImplementedError("PaddleCloudRoleMaker(is_collective=False): parameter-server training is not "
                                      "supported yet; use is_collective=True")
        self.is_collective = True

    def _worker_index(self):
        return get_rank()

    def _worker_num(self):
        return get_world_size()


class UserDefinedRoleMaker(PaddleCloudRoleMaker):
    """The job given explicitly (current_id, worker_num); it must agree with the launcher's."""

    def __init__(self, is_collective=False, init_gloo=False, current_id=0, role=Role.WORKER, worker_num=1,
                 worker_endpoints=None, server_endpoints=None, **kwargs):
        super().__init__(is_collective=is_collective)
        if current_id != get_rank() or worker_num != get_world_size():
            raise ValueError(f"UserDefinedRoleMaker(current_id={current_id}, worker_num={worker_num}) disagrees with "
                             f"the job: rank {get_rank()} of {get_world_size()}")
