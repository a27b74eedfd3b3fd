"""paddle.distributed.fleet.base: role_maker."""
from . import role_maker  # noqa: F401
