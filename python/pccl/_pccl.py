"""PCCL 1.0 kept its API in pccl._pccl; programs that import from there keep working."""
from pccl import *  # noqa: F401,F403
from pccl import __all__  # noqa: F401
