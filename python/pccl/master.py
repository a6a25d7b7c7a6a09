"""`python -m pccl.master` (also `pccl_master`): runs a master until SIGINT or SIGTERM.

Prints "pccl master listening on IP:PORT" (flushed) once the port is bound.
"""
import argparse
import signal
import threading

from pccl import MasterNode


def main(argv=None):
    parser = argparse.ArgumentParser(prog="pccl_master", description="Run a PCCL master node.")
    parser.add_argument("--listen-address", default="0.0.0.0:48148",
                        help="IP:PORT to listen on (default 0.0.0.0:48148)")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    master = MasterNode(listen_address=args.listen_address)
    master.run()
    print(f"pccl master listening on {args.listen_address}", flush=True)
    # Short waits: Python runs signal handlers only between bytecodes of the main thread.
    while not stop.wait(0.2):
        pass
    master.interrupt()
    master.await_termination()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
