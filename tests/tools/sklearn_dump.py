#!/usr/bin/python3
"""Loads LIBSVM files with scikit-learn's load_svmlight_file and writes what it
read in a canonical binary form that tests/unit/test_libsvm.c compares with
fsgd's reader, entry by entry.

usage: sklearn_dump.py IN OUT [IN OUT ...]

For each IN, OUT receives (little endian):
  b"FSGDSKL1", uint64 n_rows, uint64 nnz, uint64 n_cols,
  float64 label[n_rows], int64 indptr[n_rows + 1], uint32 indices[nnz],
  float32 data[nnz]
i.e. the CSR as scikit-learn stores it (explicit zeros included: sklearn keeps
them), values rounded from float64 to float32 the way fsgd stores them.
If IN cannot be loaded, OUT receives b"FSGDSKLE" followed by the error text,
and the script still exits 0 (the test decides whether that was expected).
Run with Debian's /usr/bin/python3 (python3-sklearn).
"""
import struct
import sys

import numpy as np
from sklearn.datasets import load_svmlight_file


def dump(src, dst):
    try:
        X, y = load_svmlight_file(src, zero_based=False, dtype=np.float64)
    except Exception as e:  # the test checks the reason
        with open(dst, "wb") as f:
            f.write(b"FSGDSKLE" + ("%s: %s" % (type(e).__name__, e)).encode())
        return
    X.sort_indices()  # already sorted for valid files; harmless
    with open(dst, "wb") as f:
        f.write(b"FSGDSKL1")
        f.write(struct.pack("<QQQ", X.shape[0], X.nnz, X.shape[1]))
        f.write(np.ascontiguousarray(y, dtype="<f8").tobytes())
        f.write(np.ascontiguousarray(X.indptr, dtype="<i8").tobytes())
        f.write(np.ascontiguousarray(X.indices, dtype="<u4").tobytes())
        f.write(np.ascontiguousarray(X.data.astype(np.float32), dtype="<f4").tobytes())


def main():
    args = sys.argv[1:]
    if not args or len(args) % 2:
        sys.exit(__doc__)
    for i in range(0, len(args), 2):
        dump(args[i], args[i + 1])


if __name__ == "__main__":
    main()
