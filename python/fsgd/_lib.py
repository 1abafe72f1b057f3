"""The shared libfsgd through ctypes.

ctypes, not cffi or a C extension: the package then needs no compiler or
Python headers at install time and no second copy of fsgd's option parsing;
it calls the library's own commands (fsgd_cmd_train, fsgd_cmd_predict), so a
model trained here is the one `fsgd train` writes, option for option. ctypes
releases the GIL for the length of every call into the library.
"""
import ctypes
import os
import signal
import tempfile
import threading
from pathlib import Path

from .errors import error_for

_here = Path(__file__).resolve().parent


def _find():
    env = os.environ.get("FSGD_LIB")
    if env:
        return env
    for p in (_here / "libfsgd.so", _here.parent.parent / "lib" / "libfsgd.so"):
        if p.is_file():
            return str(p)
    raise ImportError("fsgd: libfsgd.so not found (pip install ./python, or make shlib and set FSGD_LIB)")


# RTLD_GLOBAL: the CUDA plugin (lib/fsgd/backend_cuda.so) resolves fsgd's
# symbols in the process that loads it.
lib = ctypes.CDLL(_find(), mode=ctypes.RTLD_GLOBAL)
_libc = ctypes.CDLL(None)
lib.fsgd_cmd_train.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
lib.fsgd_cmd_train.restype = ctypes.c_int
lib.fsgd_cmd_predict.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
lib.fsgd_cmd_predict.restype = ctypes.c_int

# The models through fsgd/api.h: opaque handles and accessors, so that no
# struct layout is mirrored here; a library of another API version is
# refused at import.
API_VERSION = 1
lib.fsgd_api_version.argtypes = []
lib.fsgd_api_version.restype = ctypes.c_int
if lib.fsgd_api_version() != API_VERSION:
    raise ImportError("fsgd: libfsgd's API is version %d, this package's %d: reinstall the package with the "
                      "library it was built with" % (lib.fsgd_api_version(), API_VERSION))
_handle = ctypes.c_void_p
lib.fsgd_api_model_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(_handle), ctypes.c_char_p, ctypes.c_size_t]
lib.fsgd_api_model_load.restype = ctypes.c_int
lib.fsgd_api_model_kind.argtypes = [_handle]
lib.fsgd_api_model_kind.restype = ctypes.c_int
lib.fsgd_api_model_dim.argtypes = [_handle]
lib.fsgd_api_model_dim.restype = ctypes.c_uint64
lib.fsgd_api_model_has_bias.argtypes = [_handle]
lib.fsgd_api_model_has_bias.restype = ctypes.c_int
lib.fsgd_api_model_bias_value.argtypes = [_handle]
lib.fsgd_api_model_bias_value.restype = ctypes.c_float
lib.fsgd_api_model_weights.argtypes = [_handle]
lib.fsgd_api_model_weights.restype = ctypes.POINTER(ctypes.c_float)
lib.fsgd_api_model_input.argtypes = [_handle]
lib.fsgd_api_model_input.restype = ctypes.c_char_p
lib.fsgd_api_model_free.argtypes = [_handle]
lib.fsgd_api_model_free.restype = None
lib.fsgd_err_name.argtypes = [ctypes.c_int]
lib.fsgd_err_name.restype = ctypes.c_char_p
lib.fsgd_cli_status.argtypes = [ctypes.c_int]
lib.fsgd_cli_status.restype = ctypes.c_int

# The commands print to stdout and stderr (file descriptors 1 and 2); a call
# sends both to files for its length, one call at a time.
_lock = threading.Lock()


def run_command(fn, args):
    """Runs a command (lib.fsgd_cmd_train, ...) with argv args (args[0] is the
    command's name). Returns its standard output; raises FsgdError with its
    message and exit category when it fails."""
    argv = (ctypes.c_char_p * (len(args) + 1))(*[os.fsencode(str(a)) for a in args], None)
    with _lock, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        in_main = threading.current_thread() is threading.main_thread()
        handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)} if in_main else {}
        _libc.fflush(None)
        saved = os.dup(1), os.dup(2)
        try:
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            rc = fn(len(args), argv)
        finally:
            _libc.fflush(None)
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            # the commands install signal handlers that remove their temporary
            # files and die; Python's own come back
            for s, h in handlers.items():
                if h is not None:
                    signal.signal(s, h)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if rc != 0:
        raise error_for(rc, stderr.strip() or f"fsgd {args[0]} failed with status {rc}")
    return stdout, stderr


def load_model(path):
    """(kind, dim, has_bias, bias, weights as bytes, input spec) of a model
    file, checked by the C loader (magic, version, lengths, CRC32C)."""
    h = _handle()
    buf = ctypes.create_string_buffer(1024)
    rc = lib.fsgd_api_model_load(os.fsencode(str(path)), ctypes.byref(h), buf, len(buf))
    if rc != 0:
        raise error_for(lib.fsgd_cli_status(rc), buf.value.decode(errors="replace"))
    try:
        dim, has_bias = lib.fsgd_api_model_dim(h), bool(lib.fsgd_api_model_has_bias(h))
        n = dim + (1 if has_bias else 0)
        w = ctypes.string_at(lib.fsgd_api_model_weights(h), 4 * n) if n else b""
        return (lib.fsgd_api_model_kind(h), dim, has_bias, lib.fsgd_api_model_bias_value(h), w,
                lib.fsgd_api_model_input(h).decode())
    finally:
        lib.fsgd_api_model_free(h)
