#!/usr/bin/env bash
# The Python package (python/): `pip install ./python` into a virtual
# environment over Debian's Python (NumPy, SciPy, scikit-learn and pytest
# from Debian packages, nothing from PyPI), then its pytest suite
# (python/tests: models equal fsgd train's bit for bit, scikit-learn's
# check_estimator, errors, the GIL), then the README's Python example as
# written. The package carries the shared libfsgd next to $FSGD
# (make shlib: BIN/../lib/libfsgd.so); a sanitizer build of it runs with the
# sanitizer runtime preloaded.
set -euo pipefail
# real-kafka: skip
cd "$(dirname "$0")/../.."
root=$(pwd)
FSGD=${FSGD:-bin/fsgd}
BUILD=${BUILD:-build}
. tests/integration/lib/skip.bash
PY=/usr/bin/python3
needs_cmd "$PY"
"$PY" -c 'import numpy, scipy, sklearn, pytest, venv' 2>/dev/null ||
    { echo "skipped: Debian's python3 lacks numpy/scipy/sklearn/pytest/venv (apt-get install python3-sklearn python3-pytest python3-venv)"; exit 77; }
lib=$(cd "$(dirname "$FSGD")/.." && pwd)/lib/libfsgd.so
[ -f "$lib" ] || { echo "FAIL: $lib not built (make shlib)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

run=()
if nm -D "$lib" | grep ' __asan_init' >/dev/null; then
    # libasan must be the process's first library; Python's leaks are not fsgd's
    run=(env "LD_PRELOAD=$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)"
        ASAN_OPTIONS=detect_leaks=0)
fi
venv=$root/$BUILD/pyvenv
[ -x "$venv/bin/python" ] || "$PY" -m venv --system-site-packages "$venv"
# --no-build-isolation --no-deps: setuptools and the dependencies are Debian's
FSGD_LIB=$lib "$venv/bin/python" -m pip install -q --no-build-isolation --no-deps --force-reinstall ./python \
    >"$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log"; echo "FAIL: pip install ./python"; exit 1; }
rm -rf python/build python/*.egg-info
# the installed package, not python/fsgd of the checkout
where=$(cd "$tmp" && ${run[@]+"${run[@]}"} "$venv/bin/python" -c 'import fsgd; print(fsgd.__file__)')
case $where in "$venv"/*) ;; *) echo "FAIL: fsgd imported from $where, not the venv"; exit 1 ;; esac

FSGD=$root/$FSGD ${run[@]+"${run[@]}"} "$venv/bin/python" -m pytest -q -p no:cacheprovider -rs python/tests

# The README's example, as written, from a folder holding the repository's data/.
awk '/^<!-- python-example -->/ { on = 1; next } on && /^```python/ { grab = 1; next } grab && /^```/ { exit } grab' \
    README.md >"$tmp/example.py"
[ -s "$tmp/example.py" ] || { echo "FAIL: README.md has no python-example block"; exit 1; }
ln -s "$root/data" "$tmp/data"
(cd "$tmp" && ${run[@]+"${run[@]}"} "$venv/bin/python" example.py) >"$tmp/example.out"
cat "$tmp/example.out"
grep -q '^test auc 0\.9' "$tmp/example.out" || { echo "FAIL: the README example printed no test auc 0.9x"; exit 1; }
echo "ok"
