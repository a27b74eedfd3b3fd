"""The coverage targets, kept in the repository (docs/targets/, copies of shared/'s): the op names
of ops-target.txt and the Paddle API index that the tests hold the library to."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS_TARGET = os.path.join(ROOT, "docs", "targets", "ops-target.txt")
PADDLE_API_INDEX = os.path.join(ROOT, "docs", "targets", "paddle-api-index.txt")
SHARED = os.path.join(ROOT, "..", "shared")  # the originals, where the repository lies beside them


def op_names():
    """Every name of ops-target.txt (comments skipped)."""
    return [w for line in open(OPS_TARGET) if not line.startswith("#") for w in line.split()]
