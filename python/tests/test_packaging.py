"""Building the package where neither the fsgd repository nor an sdist's
C sources (csrc/) are: a clear error naming what is missing, not a raw
CalledProcessError of make (issue 40 item 13). The sdist itself is built,
installed and used in tests/integration/python_pkg.sh."""
import os
import shutil
import subprocess
import sys

import pytest


def test_build_without_a_repository_says_what_is_missing(tmp_path, root):
    pytest.importorskip("setuptools")
    pkg = tmp_path / "fsgd-0.1.0"
    shutil.copytree(root / "python", pkg, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "FSGD_LIB"}
    r = subprocess.run([sys.executable, "setup.py", "-q", "build_py"], cwd=pkg, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode != 0
    assert "is in neither (no csrc/" in r.stderr and "pip install ./python from a checkout" in r.stderr, \
        r.stderr[-2000:]
    assert "CalledProcessError" not in r.stderr
