"""PSError: a parameter-server failure; its message names the endpoint or the trainer involved."""


class PSError(RuntimeError):
    """A parameter server or trainer failed or stopped answering (the message names which)."""
