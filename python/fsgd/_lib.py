"""The shared libfsgd through ctypes.

ctypes, not cffi or a C extension: the package then needs no compiler or
Python headers at install time and no second copy of fsgd's option parsing.
Files and arrays are trained on through fsgd/api.h (fsgd_api_train_*:
files as fsgd train reads them, fsgd/train_files.h; CSR arrays handed over
as they are, no text in between); either way the model is the one `fsgd
train` writes, option for option. ctypes releases the GIL for the length of every
call into the library.
"""
import ctypes
import os
import tempfile
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
lib.fsgd_api_model_encode.argtypes = [_handle, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                                      ctypes.c_char_p, ctypes.c_size_t]
lib.fsgd_api_model_encode.restype = ctypes.c_int
lib.fsgd_api_model_score_file.argtypes = [_handle, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                                          ctypes.POINTER(ctypes.c_size_t), ctypes.c_char_p, ctypes.c_size_t]
lib.fsgd_api_model_score_file.restype = ctypes.c_int
lib.fsgd_api_buffer_free.argtypes = [ctypes.c_void_p]
lib.fsgd_api_buffer_free.restype = None
lib.fsgd_api_train_new.argtypes = [ctypes.POINTER(_handle), ctypes.c_char_p, ctypes.c_size_t]
lib.fsgd_api_train_new.restype = ctypes.c_int
lib.fsgd_api_train_new_files.argtypes = [ctypes.POINTER(_handle), ctypes.c_char_p, ctypes.c_size_t]
lib.fsgd_api_train_new_files.restype = ctypes.c_int
lib.fsgd_api_train_metrics.argtypes = [_handle, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_size_t)]
lib.fsgd_api_train_metrics.restype = ctypes.c_int
lib.fsgd_api_train_set.argtypes = [_handle, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
lib.fsgd_api_train_set.restype = ctypes.c_int
for _f in (lib.fsgd_api_train_data, lib.fsgd_api_train_test):
    _f.argtypes = [_handle, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                   ctypes.c_char_p, ctypes.c_size_t]
    _f.restype = ctypes.c_int
lib.fsgd_api_train_weights.argtypes = [_handle, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
lib.fsgd_api_train_weights.restype = ctypes.c_int
lib.fsgd_api_train_run.argtypes = [_handle, ctypes.POINTER(_handle), ctypes.c_char_p, ctypes.c_size_t]
lib.fsgd_api_train_run.restype = ctypes.c_int
lib.fsgd_api_train_stat.argtypes = [_handle, ctypes.c_char_p]
lib.fsgd_api_train_stat.restype = ctypes.c_double
lib.fsgd_api_train_free.argtypes = [_handle]
lib.fsgd_api_train_free.restype = None
lib.fsgd_err_name.argtypes = [ctypes.c_int]
lib.fsgd_err_name.restype = ctypes.c_char_p
lib.fsgd_cli_status.argtypes = [ctypes.c_int]
lib.fsgd_cli_status.restype = ctypes.c_int

def _check(rc, buf):
    if rc != 0:
        raise error_for(lib.fsgd_cli_status(rc), buf.value.decode(errors="replace"))


def _read_handle(h):
    """(kind, dim, has_bias, bias, weights as bytes, input spec, file bytes) of a model handle."""
    dim, has_bias = lib.fsgd_api_model_dim(h), bool(lib.fsgd_api_model_has_bias(h))
    n = dim + (1 if has_bias else 0)
    w = ctypes.string_at(lib.fsgd_api_model_weights(h), 4 * n) if n else b""
    buf, size, err = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.create_string_buffer(1024)
    _check(lib.fsgd_api_model_encode(h, ctypes.byref(buf), ctypes.byref(size), err, len(err)), err)
    try:
        data = ctypes.string_at(buf, size.value)
    finally:
        lib.fsgd_api_buffer_free(buf)
    return (lib.fsgd_api_model_kind(h), dim, has_bias, lib.fsgd_api_model_bias_value(h), w,
            lib.fsgd_api_model_input(h).decode(), data)


def load_model(path):
    """_read_handle's tuple for a model file, checked by the C loader (magic,
    version, lengths, CRC32C)."""
    h = _handle()
    buf = ctypes.create_string_buffer(1024)
    _check(lib.fsgd_api_model_load(os.fsencode(str(path)), ctypes.byref(h), buf, len(buf)), buf)
    try:
        return _read_handle(h)
    finally:
        lib.fsgd_api_model_free(h)


def score_file(model_bytes, path):
    """The margins of the rows of the file at path, read as the model (its
    file's bytes) says, through fsgd/api.h: a list of floats."""
    with tempfile.TemporaryDirectory(prefix="fsgd-") as tmp:
        mp = os.path.join(tmp, "model.fsgd")
        with open(mp, "wb") as f:
            f.write(model_bytes)
        h = _handle()
        err = ctypes.create_string_buffer(4096)
        _check(lib.fsgd_api_model_load(os.fsencode(mp), ctypes.byref(h), err, len(err)), err)
    try:
        buf, n = ctypes.c_void_p(), ctypes.c_size_t()
        _check(lib.fsgd_api_model_score_file(h, os.fsencode(str(path)), 0, ctypes.byref(buf), ctypes.byref(n), err,
                                             len(err)), err)
        try:
            return list((ctypes.c_double * n.value).from_address(buf.value)) if n.value else []
        finally:
            lib.fsgd_api_buffer_free(buf)
    finally:
        lib.fsgd_api_model_free(h)


# What fsgd_api_train_stat gives, by the names of fsgd train's --metrics-json
STATS = ("train_rows", "dim", "steps", "epochs_run", "best_epoch", "stopped_early", "holdout_rows", "holdout_loss",
         "lr", "l2", "alpha", "l1", "ftrl", "threads", "weights_nonzero", "weights_touched", "train_seconds",
         "test_n", "test_auc", "test_logloss", "test_accuracy", "test_rmse", "test_loss")


def _run(t, err):
    """Trains a handle of fsgd_api_train_new*: _read_handle's tuple of its model."""
    h = _handle()
    _check(lib.fsgd_api_train_run(t, ctypes.byref(h), err, len(err)), err)  # the GIL is released here
    try:
        return _read_handle(h)
    finally:
        lib.fsgd_api_model_free(h)


def train_files(options):
    """Trains on files through fsgd/api.h as `fsgd train` does. options:
    (key, value) pairs of job keys, data and test among them. Returns
    (_read_handle's tuple, the metrics JSON's text)."""
    err = ctypes.create_string_buffer(4096)
    t = _handle()
    _check(lib.fsgd_api_train_new_files(ctypes.byref(t), err, len(err)), err)
    try:
        for k, v in options:
            _check(lib.fsgd_api_train_set(t, k.encode(), os.fsencode(str(v)), err, len(err)), err)
        model = _run(t, err)
        json_text, n = ctypes.c_char_p(), ctypes.c_size_t()
        _check(lib.fsgd_api_train_metrics(t, ctypes.byref(json_text), ctypes.byref(n)), err)
        return model, ctypes.string_at(json_text, n.value).decode()
    finally:
        lib.fsgd_api_train_free(t)


def train_csr(options, rows, test=None, weight=None):
    """Trains on CSR arrays through fsgd/api.h. options: (key, value) pairs
    of job keys; rows, test: (indptr int64, indices uint32, data float64 or
    None, labels float64), C-contiguous; weight: float64 per row or None.
    Returns (_read_handle's tuple, {stat name: value})."""
    err = ctypes.create_string_buffer(1024)
    t = _handle()
    _check(lib.fsgd_api_train_new(ctypes.byref(t), err, len(err)), err)
    try:
        for k, v in options:
            _check(lib.fsgd_api_train_set(t, k.encode(), str(v).encode(), err, len(err)), err)

        def give(fn, arrays):
            indptr, indices, data, labels = arrays
            ptr = (lambda a: None if a is None else a.ctypes.data)
            _check(fn(t, len(labels), ptr(indptr), ptr(indices), ptr(data), ptr(labels), err, len(err)), err)

        give(lib.fsgd_api_train_data, rows)
        if test is not None:
            give(lib.fsgd_api_train_test, test)
        if weight is not None:
            _check(lib.fsgd_api_train_weights(t, weight.ctypes.data, len(weight), err, len(err)), err)
        model = _run(t, err)
        return model, {name: lib.fsgd_api_train_stat(t, name.encode()) for name in STATS}
    finally:
        lib.fsgd_api_train_free(t)
