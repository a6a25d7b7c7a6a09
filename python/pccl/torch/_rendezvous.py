"""Where a process group's peers meet: the master (hosted by group rank 0 unless PCCL_MASTER_ADDR names
one), its address carried by the torch store, and the wait until the run has the group's world size."""
import atexit
import os
import socket
import time

import pccl

_STORE_KEY = "pccl/master_address"
_world_groups = 0  # pccl process groups of the whole world created in this process so far
_MASTER_BIND_ATTEMPTS = 5


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def host_master():
    """A running MasterNode on a free port of every interface, and the port. The port is probed first
    (the library does not report the one it bound), so another process may take it in between: retried."""
    for attempt in range(_MASTER_BIND_ATTEMPTS):
        port = _free_port()
        try:
            master = pccl.MasterNode(f"0.0.0.0:{port}")
        except pccl.PCCLError:
            if attempt == _MASTER_BIND_ATTEMPTS - 1:
                raise
            continue
        master.run()
        atexit.register(stop_master, master)  # a running master left to the collector blocks its finalizer
        return master, port
    raise AssertionError("unreachable")


def stop_master(master):
    """Interrupts a hosted master and waits for it (idempotent)."""
    if master._running:
        master.interrupt()
        master.await_termination()


def master_address(store, rank, world_size):
    """(address, peer group, hosted MasterNode or None) of a new process group.

    PCCL_MASTER_ADDR serves the first process group of the whole world (WORLD_SIZE ranks; every rank creates
    those in the same order), in peer group PCCL_PEER_GROUP (default 0). Any other group gets a master of its
    own: a run accepts newcomers only through a vote of all its peers, which another group's communicators
    would never join. Group rank 0 hosts it and publishes HOST:PORT in the group's store (HOST: MASTER_ADDR,
    as the other ranks reach rank 0).
    """
    global _world_groups
    whole = world_size == int(os.environ.get("WORLD_SIZE", world_size))
    external = os.environ.get("PCCL_MASTER_ADDR") if whole and _world_groups == 0 else None
    _world_groups += whole
    if external:
        return external, int(os.environ.get("PCCL_PEER_GROUP", "0")), None
    if rank == 0:
        master, port = host_master()
        address = f"{os.environ.get('MASTER_ADDR') or '127.0.0.1'}:{port}"
        store.set(_STORE_KEY, address)
        return address, 0, master
    return store.get(_STORE_KEY).decode(), 0, None


def join(address, world_size, deadline, peer_group=0):
    """A Communicator of the run at `address`, returned once its peer group has world_size peers; the
    accepted peers vote newcomers in meanwhile. Raises TimeoutError at the deadline (time.monotonic())."""
    comm = pccl.Communicator(address, peer_group)
    comm.connect(n_attempts=max(1, int(deadline - time.monotonic())))
    while True:
        world = comm.get_attribute(pccl.Attribute.PEER_GROUP_WORLD_SIZE)
        if world >= world_size:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"pccl: {world} of {world_size} peers joined the run at {address} before the timeout")
        if comm.are_peers_pending():
            comm.update_topology()
        else:
            time.sleep(0.02)
    if world > world_size:
        raise RuntimeError(f"pccl: the run at {address} (peer group {peer_group}) has {world} peers, more than "
                           f"the process group's world size {world_size}")
    return comm
