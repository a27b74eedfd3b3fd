"""oneflow.support: OneFlow's small helper modules that its users and tests import (env_var_util)."""
