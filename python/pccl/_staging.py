"""Host staging for all-reduces of CUDA tensors.

The library's all-reduce reads and writes host memory only, so a CUDA send/recv pair is copied
into page-locked host tensors before the reduce (prepare) and the result is copied back into recv
after it succeeded (finish). A failed reduce therefore leaves the CUDA recv untouched, which keeps
PCCL's in-place guarantee (the buffer holds its old content after a failure).
"""
import sys

from pccl._enums import DeviceType


class HostStaging:
    """Host copies of one send/recv pair of torch tensors (same dtype and element count).

    `send_ptr` / `recv_ptr` are the host buffers' addresses (the same for in place). Pinned when
    torch has CUDA, so that the device-to-host copies run at full speed.
    """

    def __init__(self, send, recv):
        torch = sys.modules["torch"]
        pin = torch.cuda.is_available()
        self._send, self._recv = send, recv
        self.host_send = torch.empty(send.numel(), dtype=send.dtype, pin_memory=pin)
        in_place = send.data_ptr() == recv.data_ptr()
        self.host_recv = self.host_send if in_place else torch.empty(recv.numel(), dtype=recv.dtype, pin_memory=pin)
        self.send_ptr, self.recv_ptr = self.host_send.data_ptr(), self.host_recv.data_ptr()

    def prepare(self):
        """Copies send into the host buffer (synchronous: waits for the device's pending work on it)."""
        self.host_send.copy_(self._send.reshape(-1))

    def finish(self):
        """Copies the reduced host buffer back into recv."""
        self._recv.view(-1).copy_(self.host_recv)


def stage_if_cuda(s, r):
    """A HostStaging for a pair of Buffers on CUDA, None for host buffers."""
    return HostStaging(s.obj, r.obj) if s.device is DeviceType.CUDA else None
