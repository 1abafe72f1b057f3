"""A job's model from its Kafka model topic (NAME.model, trainer/KAFKA_FORMAT.md)."""
import os
import tempfile

from . import _lib, load

_lib.lib.fsgd_cmd_model.argtypes = _lib.lib.fsgd_cmd_train.argtypes
_lib.lib.fsgd_cmd_model.restype = _lib.lib.fsgd_cmd_train.restype


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
    with tempfile.TemporaryDirectory(prefix="fsgd-") as tmp:
        out = os.path.join(tmp, "model.fsgd")
        args = ["model", "assemble", "--brokers", brokers, "--name", name, "--out", out]
        if partial:
            args.append("--partial")
        if job_key_file:
            args += ["--job-key-file", os.fspath(job_key_file)]
        for k, v in (kafka_opts or {}).items():
            args += ["--kafka-opt", f"{k}={v}"]
        _lib.run_command(_lib.lib.fsgd_cmd_model, args)
        return load(out)
