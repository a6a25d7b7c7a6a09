"""The master: membership and consensus of a run, served on its own thread inside this process."""
from typing import Optional, Union

from pccl._address import socket_address
from pccl._descriptors import key_bytes
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

    As a context manager, `with MasterNode(addr) as m:` runs it (unless it runs already) and on the way out
    interrupts it, waits for it to stop and destroys it (close()).
    """

    def __init__(self, listen_address: str):
        addr = socket_address(listen_address, "listen_address")
        out = ffi.new("pcclMasterInstance_t **")
        PCCLError.check(lib.pcclCreateMaster(addr[0], out), "pcclCreateMaster")
        self._master = out[0]
        self._running = False
        self.listen_address = listen_address

    def __enter__(self) -> "MasterNode":
        if not self._running:
            self.run()
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        phase = "closed" if self._master == ffi.NULL else "running" if self._running else "created"
        return f"<pccl.MasterNode {self.listen_address} {phase}>"

    def set_run_key(self, key: Optional[Union[bytes, str]], encrypt: bool = False):
        """Admits only peers proving `key` (at least 32 secret bytes; a trailing newline is not part of it; None:
        an open run) instead of PCCL_KEY_FILE, with every connection of the run encrypted when `encrypt`; before
        run(). Raises PCCLFatalError (INVALID_ARGUMENT: too short, or encryption without a key; INVALID_USAGE:
        running)."""
        key = key_bytes(key, "key")
        PCCLError.check(lib.pcclExtMasterSetRunKey(self._master, key if key is not None else ffi.NULL,
                                                   len(key) if key is not None else 0, bool(encrypt)),
                        "pcclExtMasterSetRunKey")

    def close(self):
        """Interrupts a running master, waits until it stopped and destroys it. Idempotent."""
        master = self._master
        if master == ffi.NULL:
            return
        if self._running:
            self.interrupt()
            self.await_termination()
        self._master = ffi.NULL  # later calls pass NULL: the library refuses them
        _destroy_master(master)

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
        master, self._master = getattr(self, "_master", ffi.NULL), ffi.NULL
        if master != ffi.NULL:
            if self._running:
                _await_termination(master)
            _destroy_master(master)
