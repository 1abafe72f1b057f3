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


def test_read_model_of_a_following_job(tmp_path, fsgd_bin, a9a, brokers):
    """fsgd run --follow: read_model(partial=True) takes the newest version
    while the job trains on rows that keep arriving; after SIGTERM the
    newest version on the topic is the model file the aggregator wrote."""
    name = "pyf" + uuid.uuid4().hex[:8]
    lines = open(a9a[0]).readlines()
    (tmp_path / "d0").write_text("".join(lines[:3000]))
    (tmp_path / "d1").write_text("".join(lines[3000:6000]))
    key = tmp_path / "job.key"
    key.write_text(os.urandom(32).hex() + "\n")
    key.chmod(0o600)
    log = open(tmp_path / "run.log", "w+")
    run = subprocess.Popen([str(fsgd_bin), "run", "--follow", "--brokers", brokers, "--name", name, "--data",
                            tmp_path / "d0", "--dim", "123", "--workers", "2", "--lr", "0.05", "--version-seconds",
                            "0.5", "--out", tmp_path / "m.fsgd", "--checkpoint", tmp_path / "ck",
                            "--job-key-file", key], stdout=log, stderr=subprocess.STDOUT)

    def versions():
        log.seek(0)
        return sum("aggregator: version " in ln for ln in log)

    def wait_version(n):
        for _ in range(600):
            if versions() >= n:
                return
            assert run.poll() is None, "fsgd run --follow exited"
            time.sleep(0.1)
        pytest.fail("no version %d in 60 s" % n)

    def wait_rows(n):
        """a version that has trained n rows: an idle job makes no versions,
        so waiting for a count of them would race a job that is quick"""
        for _ in range(600):
            log.seek(0)
            if any("aggregator: version " in ln and "): %d rows, " % n in ln for ln in log):
                return
            assert run.poll() is None, "fsgd run --follow exited"
            time.sleep(0.1)
        pytest.fail("no version with %d rows trained in 60 s" % n)

    try:
        wait_version(1)
        first = read_model(brokers, name, partial=True, job_key_file=key)
        subprocess.run([str(fsgd_bin), "produce", "--follow", "--brokers", brokers, "--name", name,
                        "--job-key-file", key, tmp_path / "d1"], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=120)
        wait_rows(6000)
        later = read_model(brokers, name, partial=True, job_key_file=key)
        assert first.dim == later.dim == 123 and first.kind == later.kind == "logistic"
        assert first.to_bytes() != later.to_bytes()  # trained on the new rows since
    finally:
        run.send_signal(signal.SIGTERM)
        run.wait(60)
        log.close()
    assert run.returncode == 128 + signal.SIGTERM
    newest = read_model(brokers, name, partial=True, job_key_file=key)
    assert newest.to_bytes() == (tmp_path / "m.fsgd").read_bytes()
