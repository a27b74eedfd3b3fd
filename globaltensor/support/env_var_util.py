"""oneflow.support.env_var_util: read booleans and integers from environment variables as OneFlow does."""
import os


def string_to_bool(text):
    """'1'/'true'/'yes'/'on' (any case) is True, '0'/'false'/'no'/'off'/'' is False; other text raises ValueError."""
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on", "y", "t"):
        return True
    if value in ("0", "false", "no", "off", "n", "f", ""):
        return False
    raise ValueError(f"{text!r} is not a boolean")


def parse_boolean_from_env(name, default=False):
    """The environment variable `name` read as a boolean, or `default` when it is unset."""
    text = os.getenv(name)
    return default if text is None else string_to_bool(text)


def parse_integer_from_env(name, default=0):
    """The environment variable `name` read as an integer, or `default` when it is unset or empty."""
    text = os.getenv(name)
    return default if not text else int(text)
