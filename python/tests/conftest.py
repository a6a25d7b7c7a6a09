"""pytest setup: the source tree's package, loaded from $PCCL_LIBRARY, and the `procs` fixture."""
import os

import pytest

from harness import Procs

if not os.environ.get("PCCL_LIBRARY"):
    pytest.exit("set PCCL_LIBRARY to the libpccl.so under test (e.g. build/lib/libpccl.so)", returncode=4)
# In-process peers and masters log from library threads, also after a test ended; keep the summary readable.
os.environ.setdefault("PCCL_LOG_LEVEL", "error")


@pytest.fixture
def procs(tmp_path):
    """A Procs whose processes are killed by PID at teardown, logs in tmp_path."""
    p = Procs(tmp_path)
    yield p
    p.close()
