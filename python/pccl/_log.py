"""The library's log lines into Python's logging (pcclToolLogSetSink, pccl_tools.h).

    pccl.log_to_logging()            # records of every library thread go to logging.getLogger("pccl.lib")
    pccl.log_to_logging(level=logging.DEBUG)   # also makes the library produce debug records
    pccl.log_to_stderr()             # back to the library's own stderr lines

The library filters by its own level first (PCCL_LOG_LEVEL, default warn; `level` here sets it); the logger's level
and handlers then decide as for any record. Each record's message is "[component] text" (the component: "master",
or a peer's uuid prefix), also in the record's `pccl_component` attribute. Records are emitted on the library's
threads, which take the GIL for it. At interpreter exit the library goes back to stderr before Python tears down.
"""
import atexit
import logging
import threading
from typing import Optional, Union

from pccl._native import ffi, lib

_TO_PY = {lib.PCCL_LOG_ERROR: logging.ERROR, lib.PCCL_LOG_WARN: logging.WARNING, lib.PCCL_LOG_INFO: logging.INFO,
          lib.PCCL_LOG_DEBUG: logging.DEBUG}
_lock = threading.Lock()
_installed = None  # (the cffi callback, the logger): kept alive while the library may call it


def _library_level(level: int) -> int:
    """The library's level that produces every record a Python `level` lets through."""
    if level <= logging.DEBUG:
        return lib.PCCL_LOG_DEBUG
    if level <= logging.INFO:
        return lib.PCCL_LOG_INFO
    if level <= logging.WARNING:
        return lib.PCCL_LOG_WARN
    return lib.PCCL_LOG_ERROR


def log_to_logging(logger: Union[str, logging.Logger] = "pccl.lib", level: Optional[int] = None) -> logging.Logger:
    """Routes the library's log records (every thread, masters and communicators of this process) to `logger`
    (a name or a Logger). `level` (a logging level) also sets what the library produces. Returns the logger."""
    global _installed
    if isinstance(logger, str):
        logger = logging.getLogger(logger)
    if not isinstance(logger, logging.Logger):
        raise TypeError(f"logger must be a logging.Logger or a name, not {type(logger).__name__}")

    def sink(c_level, component, msg, _ctx):
        comp = ffi.string(component).decode("utf-8", "replace")
        text = ffi.string(msg).decode("utf-8", "replace")
        py_level = _TO_PY.get(c_level, logging.ERROR)
        if logger.isEnabledFor(py_level):
            logger.log(py_level, "[%s] %s", comp, text, extra={"pccl_component": comp})

    callback = ffi.callback("pcclToolLogSink_t", sink, onerror=lambda *exc: None)
    if level is not None:
        lib.pcclToolLogSetLevel(_library_level(int(level)))
    with _lock:
        lib.pcclToolLogSetSink(callback, ffi.NULL)  # returns once no thread is in the previous callback
        _installed = (callback, logger)
    return logger


def log_to_stderr() -> None:
    """The library writes its own log lines to stderr again (its default)."""
    global _installed
    with _lock:
        lib.pcclToolLogSetSink(ffi.NULL, ffi.NULL)
        _installed = None


atexit.register(log_to_stderr)
