#!/usr/bin/env bash
# The Python package (python/): `pip install ./python` into a virtual
# environment over Debian's Python (NumPy, SciPy, scikit-learn and pytest
# from Debian packages, nothing from PyPI), then its pytest suite
# (python/tests: models equal fsgd train's bit for bit, scikit-learn's
# check_estimator, errors, the GIL), then the README's Python example as
# written. Then the sdist (python setup.py sdist: the C sources under csrc/),
# unpacked where no repository is around it, installed into a clean venv
# (Debian's packages only, no network) that builds its own libfsgd, and
# python/README.md's example run by it; and a failing build of it says what
# it needs, not a Python traceback. The package carries the shared libfsgd next to $FSGD
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
# the README's pip command (setuptools and the dependencies are Debian's: nothing
# to download); FSGD_LIB: the library under test, not one make builds
"$venv/bin/python" -m pip uninstall -q -y fsgd >/dev/null 2>&1 || true
FSGD_LIB=$lib "$venv/bin/python" -m pip install -q --no-build-isolation "./python[sklearn]" \
    >"$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log"; echo "FAIL: pip install ./python"; exit 1; }
grep -q 'pip install --no-build-isolation "./python\[sklearn\]"' README.md ||
    { echo "FAIL: README.md's install command is not the one tested here"; exit 1; }
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

# The sdist, alone: no checkout around the unpacked folder, FSGD_LIB unset.
(cd python && "$PY" setup.py -q sdist -d "$tmp/dist") >"$tmp/sdist.log" 2>&1 ||
    { cat "$tmp/sdist.log"; echo "FAIL: python setup.py sdist"; exit 1; }
rm -rf python/build python/*.egg-info
mkdir "$tmp/alone"
tar xzf "$tmp"/dist/fsgd-*.tar.gz -C "$tmp/alone"
pkg=$(echo "$tmp"/alone/fsgd-*)
[ -f "$pkg/csrc/Makefile" ] && [ -f "$pkg/csrc/trainer/core/include/fsgd/api.h" ] ||
    { echo "FAIL: the sdist carries no C sources (csrc/)"; exit 1; }
if tar tzf "$tmp"/dist/fsgd-*.tar.gz | grep -q 'data/sets/'; then echo "FAIL: the sdist carries the data sets"; exit 1; fi
grep -q '^Description-Content-Type: text/markdown' "$pkg/PKG-INFO" || { echo "FAIL: no readme in the metadata"; exit 1; }
if grep -q 'confluent' "$pkg/PKG-INFO"; then echo "FAIL: an extra names confluent-kafka, which nothing imports"; exit 1; fi
# a build that fails (no compiler here) says what it needs, without a traceback
(cd "$pkg" && env -u FSGD_LIB CC=false "$PY" setup.py -q build_py) >"$tmp/fail.log" 2>&1 &&
    { echo "FAIL: a build with CC=false succeeded"; exit 1; }
grep -q 'fsgd: building the C library failed' "$tmp/fail.log" && grep -q 'apt-get install' "$tmp/fail.log" ||
    { cat "$tmp/fail.log"; echo "FAIL: a failed build did not say what it needs"; exit 1; }
if grep -q 'Traceback\|CalledProcessError' "$tmp/fail.log"; then cat "$tmp/fail.log"; echo "FAIL: a traceback"; exit 1; fi
rm -rf "$pkg/build" "$pkg/csrc/build" "$pkg/csrc/lib" "$pkg"/*.egg-info
clean=$tmp/clean-venv
"$PY" -m venv --system-site-packages "$clean"
(cd "$tmp" && env -u FSGD_LIB "$clean/bin/python" -m pip install -q --no-build-isolation --no-deps --no-index "$pkg") \
    >"$tmp/pip-sdist.log" 2>&1 || { tail -40 "$tmp/pip-sdist.log"; echo "FAIL: pip install of the unpacked sdist"; exit 1; }
awk '/^<!-- package-example -->/ { on = 1; next } on && /^```python/ { grab = 1; next } grab && /^```/ { exit } grab' \
    python/README.md >"$tmp/pkg_example.py"
[ -s "$tmp/pkg_example.py" ] || { echo "FAIL: python/README.md has no package-example block"; exit 1; }
mkdir "$tmp/empty"
(cd "$tmp/empty" && env -u FSGD_LIB "$clean/bin/python" - <<'PY') >"$tmp/pkg_example.out"
import fsgd, os, sys
lib = os.path.join(os.path.dirname(fsgd.__file__), "libfsgd.so")
assert fsgd.__file__.startswith(sys.prefix) and os.path.isfile(lib), (fsgd.__file__, sys.prefix)
exec(open("../pkg_example.py").read())
PY
cat "$tmp/pkg_example.out"
grep -q '^test auc 0\.9' "$tmp/pkg_example.out" && grep -q '^accuracy 0\.9' "$tmp/pkg_example.out" ||
    { echo "FAIL: python/README.md's example, from the installed sdist, printed no test auc / accuracy 0.9x"; exit 1; }
echo "ok"
