"""Where a process group's peers meet: the master (hosted by group rank 0 unless PCCL_MASTER_ADDR names
one), its address carried by the torch store, and the wait until the run has the group's world size."""
import atexit
import os
import socket
import time

import pccl

_STORE_KEY = "pccl/master_address"
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


def master_address(store, rank):
    """(address, hosted MasterNode or None): PCCL_MASTER_ADDR if set; else group rank 0 hosts a master and
    publishes HOST:PORT in the store (HOST: MASTER_ADDR, as the other ranks reach rank 0), the others read it."""
    external = os.environ.get("PCCL_MASTER_ADDR")
    if external:
        return external, None
    if rank == 0:
        master, port = host_master()
        address = f"{os.environ.get('MASTER_ADDR') or '127.0.0.1'}:{port}"
        store.set(_STORE_KEY, address)
        return address, master
    return store.get(_STORE_KEY).decode(), None


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
