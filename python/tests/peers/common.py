"""Shared by the peer scripts: joining a run of a known size and writing JSON lines."""
import json
import time

import pccl


def join(master, world, timeout_s, peer_group=0):
    """A Communicator connected to `master`, returned once the run has `world` accepted peers.

    Accepted peers vote newcomers in (are_peers_pending / update_topology) until then.
    Raises TimeoutError after timeout_s.
    """
    comm = pccl.Communicator(master, peer_group)
    comm.connect(n_attempts=3)
    deadline = time.monotonic() + timeout_s
    while comm.get_attribute(pccl.Attribute.GLOBAL_WORLD_SIZE) < world:
        if time.monotonic() > deadline:
            raise TimeoutError(f"world size {comm.get_attribute(pccl.Attribute.GLOBAL_WORLD_SIZE)} < {world}")
        if comm.are_peers_pending():
            comm.update_topology()
        else:
            time.sleep(0.02)
    return comm


class JsonLines:
    """Appends one JSON object per line to a file, flushed at once (the test polls it)."""

    def __init__(self, path):
        self.f = open(path, "a")

    def write(self, **record):
        self.f.write(json.dumps(record) + "\n")
        self.f.flush()
