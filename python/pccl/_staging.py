"""Host staging for collectives of CUDA tensors.

The library's collectives read and write host memory only, so a CUDA send/recv pair is copied
into page-locked host tensors before the operation (prepare) and the result is copied back into recv
after it succeeded (finish). A failed operation therefore leaves the CUDA recv untouched, which keeps
PCCL's in-place guarantee (the buffer holds its old content after a failure).
"""
import sys

from pccl._enums import DeviceType


class HostStaging:
    """Host copies of one send/recv pair of torch tensors of one dtype.

    `send_ptr` / `recv_ptr` are the host buffers' addresses. In place (send starts where recv starts:
    the same tensor, or a prefix of it as an in-place all-gather's input) the host send is the same
    prefix of the host recv, so the addresses are equal. Pinned when torch has CUDA, so that the
    device-to-host copies run at full speed.
    """

    def __init__(self, send, recv):
        torch = sys.modules["torch"]
        pin = torch.cuda.is_available()
        self._send, self._recv = send, recv
        in_place = send.data_ptr() == recv.data_ptr()
        self.host_recv = torch.empty(recv.numel(), dtype=recv.dtype, pin_memory=pin)
        self.host_send = self.host_recv[:send.numel()] if in_place else \
            torch.empty(send.numel(), dtype=send.dtype, pin_memory=pin)
        self.send_ptr, self.recv_ptr = self.host_send.data_ptr(), self.host_recv.data_ptr()

    def prepare(self):
        """Copies send into the host buffer (synchronous: waits for the device's pending work on it)."""
        self.host_send.copy_(self._send.reshape(-1))

    def finish(self, start=0, stop=None):
        """Copies the result back into recv: elements [start, stop) (all by default), the part the
        operation wrote, so that the rest of recv keeps its content."""
        if start == 0 and stop is None:
            self._recv.view(-1).copy_(self.host_recv)
        else:
            self._recv.view(-1)[start:stop].copy_(self.host_recv[start:stop])


def stage_if_cuda(s, r):
    """A HostStaging for a pair of Buffers on CUDA, None for host buffers."""
    return HostStaging(s.obj, r.obj) if s.device is DeviceType.CUDA else None
