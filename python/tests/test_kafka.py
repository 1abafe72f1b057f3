"""fsgd.kafka.read_model against a job's model topic on a running broker:
FSGD_BROKERS when given (the suite's real Apache Kafka), else the embedded
cluster of `fsgd run --broker-only`, a separate process serving real Kafka
protocol on loopback."""
import os
import signal
import subprocess
import time
import uuid

import pytest

import fsgd
from fsgd.kafka import read_model


@pytest.fixture
def brokers(tmp_path, fsgd_bin):
    if os.environ.get("FSGD_BROKERS"):
        yield os.environ["FSGD_BROKERS"]
        return
    log = open(tmp_path / "broker.log", "w+")
    p = subprocess.Popen([str(fsgd_bin), "run", "--broker-only", "--name", "boot"], stdout=log,
                         stderr=subprocess.STDOUT)
    try:
        for _ in range(200):
            log.seek(0)
            got = [ln[8:].strip() for ln in log if ln.startswith("brokers=")]
            if got:
                break
            assert p.poll() is None, "fsgd run --broker-only exited"
            time.sleep(0.1)
        else:
            pytest.fail("no brokers= line from fsgd run --broker-only")
        yield got[0]
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()


def test_read_model_equals_the_aggregators_file(tmp_path, fsgd_bin, a9a, brokers):
    name = "py" + uuid.uuid4().hex[:8]
    rows = tmp_path / "rows"
    rows.write_text("".join(open(a9a[0]).readlines()[:4000]))
    # the job's key, so its authenticated model topic can be read after the run
    key = tmp_path / "job.key"
    key.write_text(os.urandom(32).hex() + "\n")
    key.chmod(0o600)
    subprocess.run([str(fsgd_bin), "run", "--brokers", brokers, "--name", name, "--data", rows, "--test", a9a[1],
                    "--workers", "2", "--epochs", "2", "--codec", "none", "--quiet", "--out", tmp_path / "m.fsgd",
                    "--job-key-file", key],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    m = read_model(brokers, name, job_key_file=key)
    assert m.to_bytes() == (tmp_path / "m.fsgd").read_bytes()
    assert m.kind == "logistic" and 100 < m.dim <= 123


def test_read_model_errors(brokers):
    name = "nosuchjob" + uuid.uuid4().hex[:6]
    with pytest.raises(fsgd.FsgdError) as e:
        read_model(brokers, name)
    # a real broker has no such topic; the embedded cluster makes an empty one
    assert (e.value.category, e.value.category == "data") in (("broker", False), ("data", True))
    assert name in e.value.message or "no complete snapshot" in e.value.message, e.value.message
