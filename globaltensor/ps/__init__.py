"""The parameter server: dense blocks and sparse rows on server processes, trainers pull and push over ZeroMQ."""
from .errors import PSError
from .spec import DenseSpec, JobSpec, Rule, SparseSpec
from .server import Server
from .client import Client

__all__ = ["JobSpec", "DenseSpec", "SparseSpec", "Rule", "Server", "Client", "PSError"]
