"""fsgd from Python: train, load and use fsgd's sparse linear models.

    import fsgd
    model = fsgd.train("train.svm", test="test.svm", epochs=5, seed=1)
    scores = model.decision_function(X)     # X: SciPy CSR or NumPy, 0-based columns
    model.save("m.fsgd")

`train` takes the options of `fsgd train` as keywords (epochs=5, l2="auto",
codec="fastsgd", skip_bad=True, ...; `fsgd train --help`) and calls the same
code, so the model equals the one `fsgd train` writes with those options.
Data: a file path, a SciPy sparse matrix or NumPy array with labels, or raw
text rows with format= (criteo, tsv:..., csv:...). Failures raise
fsgd.FsgdError (message and exit category). The GIL is released while fsgd
works.
"""
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from . import _lib
from .errors import BrokerError, DataError, FsgdError, FsgdIOError, UsageError, error_for

__all__ = ["train", "load", "Model", "FsgdError", "UsageError", "DataError", "BrokerError", "FsgdIOError"]
__version__ = "0.1.0"

_KINDS = {1: "logistic", 2: "linear", 3: "svm"}


def _flags(options):
    """Keyword options as fsgd flags: epochs=5 -> --epochs 5; True -> --key;
    False -> --key=false; None is left out."""
    out = []
    for k, v in options.items():
        if v is None:
            continue
        flag = "--" + k.replace("_", "-")
        if v is True:
            out.append(flag)
        elif v is False:
            out.append(flag + "=false")
        else:
            out += [flag, str(v)]
    return out


def _is_path(x):
    return isinstance(x, (str, os.PathLike))


def _is_text_rows(x):
    return isinstance(x, (list, tuple)) and len(x) > 0 and isinstance(x[0], str)


def _csr_arrays(X, y, name):
    """X (SciPy sparse or 2-D NumPy; column j is LIBSVM index j + 1) and its
    labels y as the CSR arrays fsgd/api.h takes: (indptr int64, indices
    uint32, data float64, labels float64). SciPy's arrays are handed over as
    they are (a copy only where the type differs); duplicates are summed."""
    if y is None:
        raise UsageError(f"{name}: arrays need their labels (y)", 2)
    try:
        import scipy.sparse as sp
    except ImportError:  # NumPy input needs no SciPy
        sp = None
    if sp is not None and sp.issparse(X):
        X = sp.csr_matrix(X)
        if not X.has_canonical_format:  # sorted columns, no duplicates: what a LIBSVM row holds
            X = X.copy()
            X.sum_duplicates()
        indptr, indices, data = X.indptr, X.indices, X.data
    else:
        X = np.asarray(X)
        if X.ndim != 2:
            raise UsageError(f"{name}: X must be 2-D (rows x features)", 2)
        nz = X != 0  # NaN included: the library names its row
        indptr = np.concatenate([[0], np.cumsum(nz.sum(axis=1))])
        rows, indices = np.nonzero(nz)
        data = X[rows, indices]
    if indices.size and (indices.min() < 0 or indices.max() >= 1 << 32):
        raise UsageError(f"{name}: column indices must be in [0, 2^32)", 2)
    y = np.ascontiguousarray(np.asarray(y, dtype=np.float64).ravel())
    if y.shape[0] != X.shape[0]:
        raise UsageError(f"{name}: {X.shape[0]} rows but {y.shape[0]} labels", 2)
    return (np.ascontiguousarray(indptr, dtype=np.int64), np.ascontiguousarray(indices).astype(np.uint32, copy=False),
            np.ascontiguousarray(data, dtype=np.float64), y)


def _options(options):
    """Keyword options as job keys: True/False as "true"/"false"; None is left out."""
    return [(k, "true" if v is True else "false" if v is False else v) for k, v in options.items() if v is not None]


def _metrics(stats):
    """fsgd_api_train_stat's figures as fsgd train's metrics JSON names them (NaN: None)."""
    v = {k: (None if np.isnan(x) else x) for k, x in stats.items()}
    ints = ("train_rows", "dim", "steps", "holdout_rows", "threads", "weights_nonzero", "weights_touched")
    m = {k: (int(v[k]) if k in ints else v[k]) for k in v if not k.startswith("test_") and k != "ftrl"}
    m["optimizer"] = "ftrl" if v["ftrl"] else "adam"
    m["stopped_early"] = bool(v["stopped_early"])
    m["test"] = {k[5:]: v[k] for k in v if k.startswith("test_")}
    m["test"]["n"] = int(v["test_n"])
    return m


def _train_arrays(data, y, test, test_y, job, sample_weight, options):
    rows = _csr_arrays(data, y, "data")
    tests = None if test is None else _csr_arrays(test, test_y, "test")
    weight = None
    if sample_weight is not None:
        weight = np.ascontiguousarray(np.asarray(sample_weight, dtype=np.float64).ravel())
        if weight.shape[0] != rows[3].shape[0]:
            raise UsageError(f"sample_weight: {weight.shape[0]} weights for {rows[3].shape[0]} rows", 2)
    opts = ([("job", os.fspath(job))] if job is not None else []) + _options(options)
    (kind, dim, has_bias, bias, w, spec, raw), stats = _lib.train_csr(opts, rows, tests, weight)
    model = Model(_KINDS.get(kind, str(kind)), dim, np.frombuffer(w, dtype="<f4").copy(), has_bias, bias, spec, raw)
    model.metrics = _metrics(stats)
    return model


def _rows_file(tmp, name, data, fmt):
    """A file fsgd can read for data given as a path or raw text rows."""
    if data is None or _is_path(data):
        return data
    if fmt in (None, "libsvm") and not _is_text_rows(data):
        raise UsageError(f"{name}: give data and test the same way: both files (or text rows), or both arrays", 2)
    path = os.path.join(tmp, name)
    with open(path, "w") as f:  # raw text rows, one per line
        for row in data:
            f.write(row.rstrip("\n") + "\n")
    return path


def train(data=None, y=None, *, test=None, test_y=None, format=None, job=None, sample_weight=None, **options):
    """Trains a model as `fsgd train` does and returns it (Model).

    data, test: a file path; a SciPy sparse matrix or NumPy array (with y,
    test_y: labels, -1/+1 or 0/1 for classification), handed to the library
    as CSR arrays; or a list of raw text rows (format= names their layout).
    sample_weight: one weight a row of array data (classification; rows of
    weight 0 left out), as VW's importance weights. job: a YAML job file.
    options: any `fsgd train` option, as a keyword (underscores for dashes).
    The metrics of the run are in model.metrics: the metrics JSON for files;
    for arrays the figures fsgd/api.h gives (fsgd._lib.STATS, same names)."""
    if data is not None and not _is_path(data) and format in (None, "libsvm") and not _is_text_rows(data):
        if test is not None and (_is_path(test) or _is_text_rows(test)):
            raise UsageError("test: give data and test the same way: both files (or text rows), or both arrays", 2)
        return _train_arrays(data, y, test, test_y, job, sample_weight, options)
    if sample_weight is not None:
        raise UsageError("sample_weight is for rows given as arrays (a VW file carries its rows' importance)", 2)
    with tempfile.TemporaryDirectory(prefix="fsgd-") as tmp:
        opts = [("job", os.fspath(job))] if job is not None else []
        d = _rows_file(tmp, "train", data, format)
        t = _rows_file(tmp, "test", test, format)
        if d is not None:
            opts.append(("data", os.fspath(d)))
        if t is not None:
            opts.append(("test", os.fspath(t)))
        if format is not None:
            opts.append(("format", format))
        for k in ("out", "metrics_json"):
            if options.get(k) is not None:
                raise UsageError(f"{k}: the model is returned (Model.save writes it; its metrics are model.metrics)", 2)
        (kind, dim, has_bias, bias, w, spec, raw), metrics = _lib.train_files(opts + _options(options))
        model = Model(_KINDS.get(kind, str(kind)), dim, np.frombuffer(w, dtype="<f4").copy(), has_bias, bias, spec,
                      raw)
        model.metrics = json.loads(metrics)
        return model


def load(path):
    """Reads a model file (fsgd's format, checked: CRC32C, lengths)."""
    kind, dim, has_bias, bias, w, spec, _ = _lib.load_model(path)
    return Model(_KINDS.get(kind, str(kind)), dim, np.frombuffer(w, dtype="<f4").copy(), has_bias, bias, spec,
                 Path(path).read_bytes())  # the file's own bytes, whatever version wrote them


def _not_finite(row, col, v):
    raise DataError(f"X: row {row}, column {col} holds {v}: a score needs finite values", 3)


class Model:
    """A trained linear model. kind: "logistic", "linear" or "svm"; weights:
    float32 array of dim feature weights (column j: LIBSVM index j + 1);
    intercept: the bias weight (0 without one) applied to the constant
    feature bias_value; input_spec: the delimited-row spec it hashes raw rows
    with ("" for LIBSVM)."""

    def __init__(self, kind, dim, w, has_bias, bias_value, input_spec, data):
        self.kind = kind
        self.dim = int(dim)
        self.has_bias = has_bias
        self.bias_value = float(bias_value)
        self._w = w
        self.input_spec = input_spec
        self._bytes = data
        self.metrics = None
        self.output = ""

    @property
    def weights(self):
        return self._w[: self.dim]

    @property
    def intercept(self):
        return float(self._w[self.dim]) if self.has_bias else 0.0

    def to_bytes(self):
        """The model file's bytes."""
        return self._bytes

    def save(self, path):
        """Writes the model file (what fsgd predict and export read)."""
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(self._bytes)
        os.replace(tmp, path)

    load = staticmethod(load)

    def decision_function(self, X):
        """Margins x.w + intercept * bias_value, one per row (float64). X: SciPy
        sparse or NumPy (columns beyond dim are unseen features: ignored), or,
        for a model of raw rows, a list of such rows or a file path (scored by
        fsgd predict, which hashes them)."""
        if _is_path(X) or (isinstance(X, (list, tuple)) and X and isinstance(X[0], str)):
            return self._predict_rows(X)
        try:
            import scipy.sparse as sp
        except ImportError:
            sp = None
        w = self.weights.astype(np.float64)
        if sp is not None and sp.issparse(X):
            X = sp.csr_matrix(X)
            if X.shape[1] > self.dim:
                X = X[:, : self.dim]
            bad = np.flatnonzero(~np.isfinite(X.data))
            if bad.size:  # a NaN or infinite value scores NaN: refused, named (as train does)
                k = int(bad[0])
                _not_finite(int(np.searchsorted(X.indptr, k, side="right")) - 1, int(X.indices[k]), X.data[k])
            m = X @ w[: X.shape[1]]
        else:
            X = np.asarray(X, dtype=np.float64)
            n = min(X.shape[1], self.dim)
            bad = np.argwhere(~np.isfinite(X[:, :n]))
            if bad.size:
                _not_finite(int(bad[0][0]), int(bad[0][1]), X[bad[0][0], bad[0][1]])
            m = X[:, :n] @ w[:n]
        return np.asarray(m).ravel() + self.intercept * self.bias_value

    def _predict_rows(self, rows):
        with tempfile.TemporaryDirectory(prefix="fsgd-") as tmp:
            path = rows
            if not _is_path(rows):
                path = os.path.join(tmp, "rows")
                with open(path, "w") as f:
                    for r in rows:
                        f.write(r.rstrip("\n") + "\n")
            # read and hashed as the model's input says (fsgd predict's reader)
            return np.array(_lib.score_file(self.to_bytes(), path), dtype=np.float64)

    def predict_proba(self, X):
        """[P(y = -1), P(y = +1)] per row, shape (rows, 2) as scikit-learn's
        (classes -1, +1; logistic models)."""
        if self.kind != "logistic":
            raise UsageError(f"predict_proba needs a logistic model, not {self.kind}", 2)
        p = 1.0 / (1.0 + np.exp(-self.decision_function(X)))
        return np.column_stack([1.0 - p, p])

    def predict(self, X):
        """Labels +1/-1 (margin > 0) for classifiers, values for linear models."""
        m = self.decision_function(X)
        return m if self.kind == "linear" else np.where(m > 0, 1.0, -1.0)

    def __repr__(self):
        return f"fsgd.Model({self.kind}, dim={self.dim}, intercept={self.has_bias})"
