"""A job's model from its Kafka model topic (NAME.model, trainer/KAFKA_FORMAT.md)."""
import ctypes
import os

import numpy as np

from . import _KINDS, Model, _lib
from .errors import UsageError

# fsgd/api.h (trainer/job/api_kafka.c)
_lib.lib.fsgd_api_model_from_topic.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                               ctypes.POINTER(_lib._handle), ctypes.POINTER(ctypes.c_uint64),
                                               ctypes.c_char_p, ctypes.c_size_t]
_lib.lib.fsgd_api_model_from_topic.restype = ctypes.c_int


def read_model(brokers, name, *, partial=False, kafka_opts=None, job_key_file=None):
    """The newest model of job `name` on `brokers` ("host:port,..."): its last
    snapshot plus the deltas after it, rebuilt by fsgd's own reader (the
    `fsgd model assemble` the integration tests check against an outside
    decoder). A finished job's model equals the file its aggregator wrote, bit
    for bit. partial=True also takes a job still running (else: FsgdError
    unless the final snapshot is there); for a job that follows its data
    topic (fsgd run --follow) that is its newest model version plus the
    steps after it, and once it stopped its last version, which equals the
    aggregator's --out file. kafka_opts: librdkafka security
    settings {"security.protocol": ...}. job_key_file: the job's key file
    (trainer/KAFKA_FORMAT.md, "Authentication"): only messages with its tag
    are assembled; without it a job's authenticated topic (every fsgd run's)
    is refused. Raises fsgd.BrokerError when the brokers cannot be read."""
    lines = []
    if partial:
        lines.append("partial=1")
    if job_key_file:
        lines.append("job_key_file=" + os.fspath(job_key_file))
    for k, v in (kafka_opts or {}).items():
        if "\n" in f"{k}{v}":
            raise UsageError(f"kafka_opts: {k!r}: a setting is one line", 2)
        lines.append(f"{k}={v}")
    err = ctypes.create_string_buffer(4096)
    h, step = _lib._handle(), ctypes.c_uint64()
    _lib._check(_lib.lib.fsgd_api_model_from_topic(brokers.encode(), name.encode(), "\n".join(lines).encode(),
                                                  ctypes.byref(h), ctypes.byref(step), err, len(err)), err)
    try:
        kind, dim, has_bias, bias, w, spec, raw = _lib._read_handle(h)
    finally:
        _lib.lib.fsgd_api_model_free(h)
    return Model(_KINDS.get(kind, str(kind)), dim, np.frombuffer(w, dtype="<f4").copy(), has_bias, bias, spec, raw)
