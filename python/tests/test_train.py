"""fsgd.train and fsgd.Model against the fsgd command line."""
import subprocess
import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file

import fsgd

OPTS = dict(epochs=3, seed=2, threads=1, codec="fastsgd")
CLI = ["--epochs", "3", "--seed", "2", "--threads", "1", "--codec", "fastsgd"]


def cli_train(fsgd_bin, out, *args):
    subprocess.run([str(fsgd_bin), "train", *args, "--quiet", "--out", str(out)], check=True,
                   stdout=subprocess.DEVNULL)
    return out.read_bytes()


def test_model_equals_fsgd_train_bit_for_bit(tmp_path, fsgd_bin, a9a):
    m = fsgd.train(str(a9a[0]), test=a9a[1], **OPTS)
    want = cli_train(fsgd_bin, tmp_path / "cli.fsgd", "--data", a9a[0], "--test", a9a[1], *CLI)
    assert m.to_bytes() == want
    assert m.metrics["test"]["auc"] > 0.89
    m.save(tmp_path / "py.fsgd")
    assert (tmp_path / "py.fsgd").read_bytes() == want


def test_defaults_equal_fsgd_train(tmp_path, fsgd_bin, a9a):
    # epochs, lr and l2 auto: the holdout, the early stop and the best weights
    m = fsgd.train(a9a[0], threads=1)
    assert m.to_bytes() == cli_train(fsgd_bin, tmp_path / "cli.fsgd", "--data", a9a[0], "--threads", "1")
    assert m.metrics["stopped_early"] in (True, False)


def test_csr_arrays_train_the_same_model_as_the_file(a9a):
    X, y = load_svmlight_file(str(a9a[0]), zero_based=False)
    from_file = fsgd.train(a9a[0], **OPTS)
    from_csr = fsgd.train(sp.csr_matrix(X), y, **OPTS)
    assert from_csr.to_bytes() == from_file.to_bytes()
    dense = fsgd.train(X[:2000].toarray(), y[:2000], **OPTS)
    assert dense.to_bytes() == fsgd.train(X[:2000], y[:2000], **OPTS).to_bytes()


def test_predict_matches_fsgd_predict(tmp_path, fsgd_bin, a9a):
    m = fsgd.train(a9a[0], **OPTS)
    m.save(tmp_path / "m.fsgd")
    subprocess.run([str(fsgd_bin), "predict", "--model", tmp_path / "m.fsgd", "--data", a9a[1], "--out",
                    tmp_path / "s.txt", "--quiet"], check=True)
    want = np.loadtxt(tmp_path / "s.txt")
    Xt, yt = load_svmlight_file(str(a9a[1]), zero_based=False, n_features=123)
    np.testing.assert_allclose(m.decision_function(Xt), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(m.decision_function(str(a9a[1])), want, rtol=1e-6, atol=1e-6)
    p = m.predict_proba(Xt)
    assert np.all((p > 0) & (p < 1))
    acc = np.mean(m.predict(Xt) == yt)
    assert acc > 0.84
    assert m.weights.shape == (m.dim,) and m.weights.dtype == np.float32
    assert m.intercept == m._w[m.dim]


def test_save_load_round_trip(tmp_path, a9a):
    m = fsgd.train(a9a[0], **OPTS)
    m.save(tmp_path / "m.fsgd")
    back = fsgd.load(tmp_path / "m.fsgd")
    assert back.to_bytes() == m.to_bytes()
    assert np.array_equal(back.weights, m.weights) and back.intercept == m.intercept
    assert back.kind == "logistic" and back.dim == m.dim


def test_raw_rows_with_a_format(tmp_path, fsgd_bin):
    rows = tmp_path / "day.tsv"
    subprocess.run([str(fsgd_bin), "gen", "--format", "criteo", "--rows", "3000", "--seed", "4", "--out", rows],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lines = rows.read_text().splitlines()
    m = fsgd.train(lines, format="criteo", hash_bits=16, epochs=2, seed=1, threads=1)
    want = cli_train(fsgd_bin, tmp_path / "cli.fsgd", "--data", rows, "--format", "criteo", "--hash-bits", "16",
                     "--epochs", "2", "--seed", "1", "--threads", "1")
    assert m.to_bytes() == want
    assert m.input_spec.startswith("tsv:")
    s = m.decision_function(lines[:50])
    assert s.shape == (50,) and np.all(np.isfinite(s))


def test_vw_rows_with_crosses_and_tags(tmp_path, fsgd_bin):
    # VW text rows, -q ab as the keyword interactions: the same model as the CLI's;
    # rows with tags score (fsgd predict writes "score tag")
    rng = np.random.default_rng(3)
    lines = []
    for i in range(2000):
        a, b = rng.integers(0, 20, 2)
        y = 1 if (a + b) % 3 == 0 else -1
        lines.append(f"{y} 'r{i}|a x{a} |b y{b}")
    path = tmp_path / "rows.vw"
    path.write_text("\n".join(lines) + "\n")
    m = fsgd.train(lines, format="vw", interactions="ab", bits=16, epochs=3, seed=1, threads=1)
    want = cli_train(fsgd_bin, tmp_path / "cli.fsgd", "--data", path, "--format", "vw", "-q", "ab", "--bits", "16",
                     "--epochs", "3", "--seed", "1", "--threads", "1")
    assert m.to_bytes() == want
    assert m.input_spec == "vw:bits=16:seed=0:interactions=ab"
    s = m.decision_function(lines[:100])
    assert s.shape == (100,) and np.all(np.isfinite(s))
    # the same margins as fsgd predict's, which reads the rows the same way (tags written after the score)
    (tmp_path / "head.vw").write_text("\n".join(lines[:100]) + "\n")
    out = subprocess.run([str(fsgd_bin), "predict", "--model", str(tmp_path / "cli.fsgd"), "--data",
                          str(tmp_path / "head.vw"), "--quiet"], check=True, capture_output=True, text=True).stdout
    assert [float(line.split()[0]) for line in out.splitlines()] == s.tolist()
    assert out.splitlines()[7].split()[1] == "r7"


def test_errors_carry_message_and_category(tmp_path, a9a):
    with pytest.raises(fsgd.UsageError) as e:
        fsgd.train(a9a[0], epochz=3)
    assert e.value.category == "usage" and e.value.status == 2 and "'epochz'" in e.value.message
    with pytest.raises(fsgd.FsgdIOError) as e:
        fsgd.train(tmp_path / "missing.svm")
    assert e.value.category == "io" and "missing.svm" in e.value.message
    bad = tmp_path / "bad.svm"
    bad.write_text("+1 1:1 2:x\n-1 3:1\n")
    with pytest.raises(fsgd.DataError) as e:
        fsgd.train(bad)
    assert e.value.category == "data" and "bad.svm:1" in e.value.message
    (tmp_path / "junk.fsgd").write_bytes(b"not a model")
    with pytest.raises(fsgd.FsgdError) as e:
        fsgd.load(tmp_path / "junk.fsgd")
    assert e.value.category == "data"



def test_an_empty_file_is_a_data_error_not_a_crash(tmp_path):
    # issue 40 item 1: a 0-byte file crashed the loader (and the interpreter)
    empty = tmp_path / "e.svm"
    empty.write_bytes(b"")
    with pytest.raises(fsgd.DataError) as e:
        fsgd.train(empty)
    assert "e.svm" in e.value.message and "no rows" in e.value.message

def test_training_releases_the_gil(a9a):
    # While fsgd trains in a thread, this thread keeps running: no gap as long
    # as the training (which a held GIL would make).
    done, t = [], threading.Thread(target=lambda: done.append(fsgd.train(a9a[0], epochs=200, threads=1)))
    t0 = time.monotonic()
    t.start()
    last, gap = time.monotonic(), 0.0
    while t.is_alive():
        now = time.monotonic()
        gap, last = max(gap, now - last), now
    t.join()
    took = time.monotonic() - t0
    assert done and took > 0.2, f"training took {took:.3f} s: too short to tell"
    assert gap < took / 2, f"this thread stalled {gap:.3f} s of {took:.3f} s"
