"""FsgdClassifier.fit against `fsgd train` on the same rows (issue 40 item
14): 100k rows of 40 nonzeros (binary, CTR-like, 2^20 columns), epochs 3,
every row trained on (no test split), one thread and the default threads.
Prints one line a case: "bench python_fit case=... seconds=...".

    FSGD=bin/fsgd build/pyvenv/bin/python python/bench/fit.py
"""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

from fsgd.sklearn import FsgdClassifier

ROWS, NNZ, DIM = 100_000, 40, 1 << 20


def data(seed=1):
    rng = np.random.default_rng(seed)
    cols = np.sort(np.stack([rng.choice(DIM, NNZ, replace=False) for _ in range(ROWS)]), axis=1)
    X = sp.csr_matrix((np.ones(ROWS * NNZ), cols.ravel(), np.arange(0, ROWS * NNZ + 1, NNZ)), shape=(ROWS, DIM))
    w = rng.normal(size=DIM)
    y = np.where(X @ w + rng.normal(size=ROWS) > 0, 1.0, -1.0)
    return X, y


def main():
    fsgd_bin = os.environ.get("FSGD", "bin/fsgd")
    X, y = data()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "rows.svm")
        dump_svmlight_file(X, y, path, zero_based=False)
        for threads in (1, None):
            t = time.monotonic()
            FsgdClassifier(epochs=3, threads=threads if threads else FsgdClassifier().threads).fit(X, y)
            fit_s = time.monotonic() - t
            args = [fsgd_bin, "train", "--data", path, "--epochs", "3", "--test-fraction", "0", "--quiet",
                    "--out", os.path.join(tmp, "m.fsgd")] + (["--threads", str(threads)] if threads else [])
            t = time.monotonic()
            subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
            cli_s = time.monotonic() - t
            print(f"bench python_fit rows={ROWS} nnz_per_row={NNZ} threads={threads or 'default'} "
                  f"fit_seconds={fit_s:.2f} cli_seconds={cli_s:.2f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
