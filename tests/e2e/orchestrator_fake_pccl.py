#!/usr/bin/env python3
"""orchestrator_fake_pccl.py - a stand-in for `pccl` that lets tests/e2e/test_orchestrator_reports.sh check the
stress orchestrator's failure detection in seconds, without real peers.

`master ...` prints a listening line and waits for SIGTERM; `join ...` prints a step event every
50 ms (revision and hash follow the wall clock, so every peer agrees). FAKE_PCCL_MODE picks what
goes wrong, once per run (the first peer past 0.3 s of stepping, claimed by a file in FAKE_PCCL_DIR):
  clean         nothing
  peer-exit66   that peer prints a ThreadSanitizer report and exits 66 (TSan's halt_on_error)
  peer-abort    that peer prints an AddressSanitizer report and aborts (ASan's abort_on_error)
  peer-report   that peer prints a UBSan runtime error and goes on (only the report tells)
  master-leak   the master prints a LeakSanitizer report at SIGTERM and exits 23
"""
import json
import os
import signal
import sys
import time

mode = os.environ.get("FAKE_PCCL_MODE", "clean")


def claim():
    try:
        os.close(os.open(os.path.join(os.environ["FAKE_PCCL_DIR"], "claimed"), os.O_CREAT | os.O_EXCL))
        return True
    except FileExistsError:
        return False


def master():
    if "--help" in sys.argv:
        print("usage: pccl master [--listen HOST:PORT]")
        return 0
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    print("pccl master listening on 127.0.0.1:1", flush=True)
    while not stop:
        time.sleep(0.05)
    if mode == "master-leak":
        sys.stderr.write("=================================================================\n"
                         "==42==ERROR: LeakSanitizer: detected memory leaks\n\n"
                         "Direct leak of 64 byte(s) in 1 object(s) allocated from:\n"
                         "    #0 0x7f in malloc\n    #1 0x55 in fake_master_leak master/fake.c:1\n")
        return 23
    return 0


def join():
    start = time.monotonic()
    while True:
        rev = int(time.time() * 20)
        print(json.dumps({"event": "step", "revision": rev, "hash": "%016x" % (rev * 2654435761), "ms": 50}),
              flush=True)
        if mode.startswith("peer-") and time.monotonic() - start > 0.3 and claim():
            if mode == "peer-exit66":
                sys.stderr.write("==================\nWARNING: ThreadSanitizer: data race (pid=%d)\n"
                                 "  Write of size 8 at 0x7b04 by thread T2:\n    #0 fake_race libpccl/src/fake.c:1\n"
                                 "SUMMARY: ThreadSanitizer: data race libpccl/src/fake.c:1 in fake_race\n"
                                 "==================\n" % os.getpid())
                sys.stderr.flush()
                os._exit(66)
            if mode == "peer-abort":
                sys.stderr.write("=================================================================\n"
                                 "==%d==ERROR: AddressSanitizer: heap-use-after-free on address 0x6020\n"
                                 "    #0 0x55 in fake_uaf libpccl/src/fake.c:1\n" % os.getpid())
                sys.stderr.flush()
                signal.signal(signal.SIGABRT, signal.SIG_DFL)
                os.abort()
            if mode == "peer-report":
                sys.stderr.write("libpccl/src/fake.c:1:2: runtime error: signed integer overflow\n")
                sys.stderr.flush()
        time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(master() if sys.argv[1] == "master" else join())
