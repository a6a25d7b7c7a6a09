"""The loaded library: `ffi`, `lib` (every call releases the GIL: cffi drops it around foreign
calls) and `library_path`. Importing this module loads libpccl and calls pcclInit once."""
from pccl._loader import load

ffi, lib, library_path = load()
