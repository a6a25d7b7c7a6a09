"""One thread per process group runs its operations in the order they were issued, so every rank runs
them in the same order (torch's contract for a group) and a blocked operation never holds the caller."""
import queue
import threading

import torch
from torch._C._distributed_c10d import Work as _CWork

import pccl


class PCCLWork(_CWork):
    """A c10d Work over a torch future: wait() raises the operation's error, get_future() yields the
    collective's output tensors.

    C++ callers (DDP, _broadcast_coalesced) reach these methods only while this Python object lives, so the
    worker keeps it until it was waited on, or its future handed out, and the operation ended.
    """

    def __init__(self, fut, keep):
        super().__init__()
        self._fut, self._keep = fut, keep
        keep.add(self)

    def _release(self, _fut=None):
        self._keep.discard(self)

    def wait(self, timeout=None):
        try:
            self._fut.wait()
        finally:
            if self._fut.done():
                self._release()
        return True

    def get_future(self):
        self._fut.add_done_callback(self._release)
        return self._fut

    def is_completed(self):
        return self._fut.done()

    def is_success(self):
        if not self._fut.done():
            return False
        try:
            self._fut.value()
        except Exception:
            return False
        return True

    def result(self):
        return self._fut.wait()

    def synchronize(self):
        pass


class Worker:
    """Runs submitted functions one at a time on a daemon thread; each submit returns a PCCLWork whose
    future completes with the function's value, or fails with RuntimeError carrying the function's error."""

    def __init__(self, name):
        self._queue = queue.SimpleQueue()
        self._keep = set()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn):
        fut = torch.futures.Future()
        self._queue.put((fn, fut))
        return PCCLWork(fut, self._keep)

    def stop(self, timeout_s):
        """Ends the thread after the operations already submitted; waits for it up to timeout_s."""
        self._queue.put(None)
        self._thread.join(timeout_s)

    def _loop(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, fut = item
            try:
                value = fn()
            except (pccl.PCCLError, ValueError, TypeError, RuntimeError) as e:
                err = RuntimeError(str(e) if str(e).startswith("pccl:") else f"pccl: {e}")
                err.__cause__ = e
                fut.set_exception(err)
            except BaseException as e:  # anything else still ends the operation on this rank
                fut.set_exception(e)
            else:
                fut.set_result(value)
