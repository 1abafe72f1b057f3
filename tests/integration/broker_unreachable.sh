#!/usr/bin/env bash
# Bounded waits (issue 27, part 3): every role, and fsgd model assemble, pointed at an address where
# nothing listens says which brokers it waits for, then gives up after
# connect_timeout_ms with exit 4 and a message naming the broker and
# librdkafka's cause. The port is one this script bound and closed, so
# nothing listens there. How long each took is printed, not asserted.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
addr=127.0.0.1:$port
printf '1 1:1 2:1\n0 3:1\n' >"$tmp/rows.svm"
check() { # NAME CMD...
    local name=$1 rc=0 t0 took
    shift
    t0=$(date +%s.%N)
    timeout 120 "$FSGD" "$@" --brokers "$addr" --connect-timeout-ms 2000 >"$tmp/$name.log" 2>&1 || rc=$?
    took=$(echo "$(date +%s.%N) - $t0" | bc)
    [ $rc -eq 4 ] || { echo "$name: exit $rc, not 4:"; cat "$tmp/$name.log"; exit 1; }
    grep -q "connecting to $addr (job .*giving up after 2.0 s" "$tmp/$name.log" ||
        { echo "$name: no line saying what it waits for:"; cat "$tmp/$name.log"; exit 1; }
    grep -q "brokers $addr: no connection within 2.0 s: .*Connection refused.*(_TRANSPORT)" "$tmp/$name.log" ||
        { echo "$name: the message does not name the broker and the cause:"; cat "$tmp/$name.log"; exit 1; }
    echo "ok: $name: exit 4 after $took s"
}
check run run --name nowhere --data "$tmp/rows.svm" --epochs 1
check produce produce --name nowhere "$tmp/rows.svm"
check aggregator aggregator --name nowhere --data "$tmp/rows.svm"
check worker worker --name nowhere --id 1
check assemble model assemble --name nowhere --out "$tmp/m.fsgd"
[ ! -e "$tmp/m.fsgd" ] || { echo "assemble: wrote a model without a broker"; exit 1; }
