"""The master: membership and consensus of a run, served on its own thread inside this process."""
from pccl._address import socket_address
from pccl._errors import PCCLError
from pccl._native import ffi, lib

# Looked up now, not in __del__ (see _comm.py: a finalizer must not make cffi take its parser's lock).
_await_termination = lib.pcclMasterAwaitTermination
_destroy_master = lib.pcclDestroyMaster


class MasterNode:
    """A master bound to listen_address ('IP:PORT', '[IPv6]:PORT' or 'HOST:PORT'; port 0 picks a free one) at construction.

    run() starts it and returns; interrupt() asks it to stop. Dropping a running master blocks
    until it was interrupted (PCCL 1.0's behaviour, which keeps `master.run()` scripts alive).
    Raises ValueError for a bad address, PCCLError (INTERNAL_ERROR) if the port cannot be bound.
    """

    def __init__(self, listen_address: str):
        addr = socket_address(listen_address, "listen_address")
        out = ffi.new("pcclMasterInstance_t **")
        PCCLError.check(lib.pcclCreateMaster(addr[0], out), "pcclCreateMaster")
        self._master = out[0]
        self._running = False

    def run(self):
        """Starts serving on a thread of the library and returns at once."""
        PCCLError.check(lib.pcclRunMaster(self._master), "pcclRunMaster")
        self._running = True

    def interrupt(self):
        """Asks the master to stop; returns at once (await_termination waits for it)."""
        PCCLError.check(lib.pcclInterruptMaster(self._master), "pcclInterruptMaster")

    def await_termination(self):
        """Blocks (GIL released) until the master stopped and closed its connections."""
        if self._running:
            PCCLError.check(lib.pcclMasterAwaitTermination(self._master), "pcclMasterAwaitTermination")
            self._running = False

    def __del__(self):
        master, self._master = getattr(self, "_master", None), None
        if master is not None:
            if self._running:
                _await_termination(master)
            _destroy_master(master)
