"""Paths the tests share: the repository (data/sets: a9a ships plain) and the
fsgd binary to compare with (FSGD, default bin/fsgd)."""
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def root():
    return ROOT


@pytest.fixture(scope="session")
def fsgd_bin():
    p = Path(os.environ.get("FSGD", ROOT / "bin" / "fsgd"))
    if not p.is_absolute():
        p = ROOT / p
    if not os.access(p, os.X_OK):
        pytest.fail(f"{p} not built (make)")
    return p


@pytest.fixture(scope="session")
def a9a():
    return ROOT / "data" / "sets" / "a9a", ROOT / "data" / "sets" / "a9a.t"
