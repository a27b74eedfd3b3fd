"""Device backends: what a placement type needs from its device (today: cuda's driver probe)."""
from . import cudnn  # noqa: F401 - flow.backends.cudnn's flags, which user code sets
