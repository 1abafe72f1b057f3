"""Arrays to the library as CSR (fsgd/api.h), no LIBSVM text in between
(issue 40 item 14): the model fsgd train writes for the same rows, row and
class weights as fsgd train applies them, errors that name the row."""
import subprocess

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

import fsgd
from fsgd import _lib
from fsgd.sklearn import FsgdClassifier

OPTS = dict(epochs=2, seed=5, threads=1, test_fraction=0)
CLI = ["--epochs", "2", "--seed", "5", "--threads", "1", "--test-fraction", "0"]


def cli_model(fsgd_bin, tmp_path, X, y, *args):
    path = tmp_path / "rows.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    out = tmp_path / "cli.fsgd"
    subprocess.run([str(fsgd_bin), "train", "--data", path, *args, "--quiet", "--out", out], check=True,
                   stdout=subprocess.DEVNULL)
    return out.read_bytes()


@pytest.fixture(scope="module")
def rows(a9a):
    X, y = load_svmlight_file(str(a9a[0]), n_features=123)
    return X[:6000], y[:6000]


def test_arrays_are_not_written_as_text(monkeypatch, rows):
    # the files' path (fsgd_api_train_new_files, which reads text) is never taken for arrays
    def no_files(*a):
        raise AssertionError("arrays went through a file")
    monkeypatch.setattr(_lib, "train_files", no_files)
    m = fsgd.train(rows[0], rows[1], **OPTS)
    assert m.metrics["train_rows"] == rows[0].shape[0] and m.metrics["test"]["n"] == 0
    assert m.output == ""
    FsgdClassifier(epochs=1, threads=1).fit(*rows)


def test_values_and_a_test_set_as_the_file(tmp_path, fsgd_bin, rows):
    # values other than 1, and test rows: the same model and test figures as fsgd train --test
    X, y = rows
    X = X.multiply(np.linspace(0.5, 2.0, X.shape[1])).tocsr()
    m = fsgd.train(X[:5000], y[:5000], test=X[5000:], test_y=y[5000:], epochs=2, seed=5, threads=1)
    dump_svmlight_file(X[5000:], y[5000:], str(tmp_path / "t.svm"), zero_based=False)
    assert m.to_bytes() == cli_model(fsgd_bin, tmp_path, X[:5000], y[:5000], "--epochs", "2", "--seed", "5",
                                     "--threads", "1", "--test", tmp_path / "t.svm")
    assert m.metrics["test"]["n"] == 1000 and 0.8 < m.metrics["test"]["auc"] < 1


def test_unsorted_and_duplicate_columns_are_summed(rows):
    X, y = rows
    coo = X[:500].tocoo()
    half = coo.data / 2  # each entry twice, halves, in reverse order
    dup = sp.csr_matrix((np.concatenate([half, half])[::-1], (np.concatenate([coo.row, coo.row])[::-1],
                        np.concatenate([coo.col, coo.col])[::-1])), shape=coo.shape)
    dup.has_canonical_format = False
    assert fsgd.train(dup, y[:500], **OPTS).to_bytes() == fsgd.train(X[:500], y[:500], **OPTS).to_bytes()


def test_sample_weight(rows):
    X, y = rows
    plain = fsgd.train(X, y, **OPTS).to_bytes()
    assert fsgd.train(X, y, sample_weight=np.ones(len(y)), **OPTS).to_bytes() == plain
    # weight 0 leaves a row out: the model of the rows left (dim given: the
    # columns of the rows left out still count in the data's, as in fsgd train)
    w = np.ones(len(y))
    w[::3] = 0
    keep = w > 0
    assert (fsgd.train(X, y, sample_weight=w, dim=123, **OPTS).to_bytes() ==
            fsgd.train(X[keep], y[keep], dim=123, **OPTS).to_bytes())
    # weights change the model
    assert fsgd.train(X, y, sample_weight=np.where(y > 0, 5.0, 1.0), **OPTS).to_bytes() != plain
    with pytest.raises(fsgd.UsageError, match="row 2"):
        fsgd.train(X[:5], y[:5], sample_weight=[1, 1, -1, 1, 1], **OPTS)
    with pytest.raises(fsgd.UsageError, match="not linear"):
        fsgd.train(X, y, sample_weight=w, model="linear", **OPTS)


def test_class_weight_is_fsgd_train_class_weight(tmp_path, fsgd_bin, rows):
    X, y = rows
    clf = FsgdClassifier(class_weight={-1.0: 1.0, 1.0: 3.0}, threads=1).fit(X, y)
    assert clf.models_[0].to_bytes() == cli_model(fsgd_bin, tmp_path, X, y, "--class-weight", "3,1",
                                                  "--threads", "1", "--test-fraction", "0")
    # a sample weight of 3 on every positive row: the same weighted loss
    sw = FsgdClassifier(threads=1).fit(X, y, sample_weight=np.where(y > 0, 3.0, 1.0))
    assert sw.models_[0].to_bytes() == clf.models_[0].to_bytes()
    bal = FsgdClassifier(class_weight="balanced", threads=1).fit(X, y)
    assert bal.models_[0].to_bytes() != FsgdClassifier(threads=1).fit(X, y).models_[0].to_bytes()


def test_class_weight_one_vs_rest(rows):
    # three classes: each binary model weighs its rows by their own class
    X, y = rows
    y3 = np.where(y > 0, 2, np.arange(len(y)) % 2)
    a = FsgdClassifier(class_weight={0: 1.0, 1: 2.0, 2: 4.0}, threads=1, epochs=1).fit(X, y3)
    b = FsgdClassifier(threads=1, epochs=1).fit(X, y3, sample_weight=np.array([1.0, 2.0, 4.0])[y3])
    assert [m.to_bytes() for m in a.models_] == [m.to_bytes() for m in b.models_]


def test_threads_default_is_fsgd_trains(rows):
    assert FsgdClassifier().get_params()["threads"] is None
    m = fsgd.train(rows[0], rows[1], epochs=1)  # threads: the library's default
    assert m.metrics["threads"] >= 1


def test_bad_arrays_name_the_row(rows):
    X, y = rows
    Xn = X[:10].toarray()
    Xn[4, 7] = np.nan
    with pytest.raises(fsgd.DataError, match="row 4"):
        fsgd.train(Xn, y[:10], **OPTS)
    yb = y[:10].copy()
    yb[3] = np.inf
    with pytest.raises(fsgd.DataError, match="row 3"):
        fsgd.train(X[:10], yb, **OPTS)
    with pytest.raises(fsgd.UsageError, match="10 rows but 9 labels"):
        fsgd.train(X[:10], y[:9], **OPTS)
    with pytest.raises(fsgd.UsageError, match="format"):
        fsgd.train(X[:10], y[:10], hash_bits=8, **OPTS)
    with pytest.raises(fsgd.UsageError, match="epochz"):
        fsgd.train(X[:10], y[:10], epochz=2)
    with pytest.raises(fsgd.UsageError, match="the same way"):
        fsgd.train(X[:10], y[:10], test="a.svm")


def test_scoring_refuses_values_that_are_not_finite(rows):
    # a NaN or infinite value made predict_proba return NaN (issue 42 item 16)
    X, y = rows
    m = fsgd.train(X[:500], y[:500], **OPTS)
    Xn = X[:10].toarray()
    Xn[4, 7] = np.nan
    with pytest.raises(fsgd.DataError, match="row 4, column 7 holds nan"):
        m.predict_proba(Xn)
    Xs = sp.csr_matrix(X[:10], copy=True)
    k = Xs.indptr[2]
    Xs.data[k] = -np.inf
    with pytest.raises(fsgd.DataError, match="row 2, column %d holds -inf" % Xs.indices[k]):
        m.predict(Xs)
    assert np.isfinite(m.predict_proba(X[:10])).all()


def test_model_predict_proba_is_two_columns(rows):
    X, y = rows
    m = fsgd.train(X, y, **OPTS)
    p = m.predict_proba(X[:20])
    assert p.shape == (20, 2)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    np.testing.assert_allclose(p[:, 1], 1 / (1 + np.exp(-m.decision_function(X[:20]))))
