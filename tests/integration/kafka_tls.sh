#!/usr/bin/env bash
# TLS for real (issue 27): the real broker's SSL listener (tests/kafka/broker.sh
# makes a CA and the broker's certificate with openssl). A job trains over
# it, every role started by fsgd run with the same --kafka-opt settings, and
# reaches the fault-free AUC +- 0.005. A client trusting another CA, and
# one speaking PLAINTEXT to the TLS port, fail: exit 4 with a message naming
# the broker and the cause, for fsgd run and for the roles started by hand
# (fsgd produce, aggregator, worker) and fsgd model assemble. How long each took is printed, not
# asserted; the bound is connect_timeout_ms (default 15 s).
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
real_only "the embedded (mock) cluster has no TLS listener"
needs_cmd openssl
secure=$("$BROKER_SH" secure "$FSGD_KAFKA_DIR") || skip "$secure"
tls=$(sed -n 's/^tls=//p' <<<"$secure")
SEC=$FSGD_KAFKA_DIR/security
TLS_OPTS=(--kafka-opt security.protocol=SSL --kafka-opt "ssl.ca.location=$SEC/ca.pem")

ref=$(reference_auc)
job=$(job_name tls)
"$FSGD" run "${COMMON[@]}" --brokers "$tls" --name "$job" --workers 2 "${TLS_OPTS[@]}" \
    --metrics-json "$tmp/tls.json" >"$tmp/tls.log" 2>&1 || { echo "training over TLS failed:"; cat "$tmp/tls.log"; exit 1; }
grep -q "aggregator: connecting to $tls" "$tmp/tls.log" || { echo "no line saying what the aggregator waits for"; cat "$tmp/tls.log"; exit 1; }
check_metrics "$tmp/tls.json" "$ref" 0.005 || { echo "over TLS: wrong rows or AUC"; exit 1; }
echo "ok: trained over TLS at $tls"

# expect_refused NAME PATTERN CMD...: exit 4, a message with the broker and PATTERN
expect_refused() {
    local name=$1 pat=$2 rc=0 t0
    shift 2
    t0=$(date +%s.%N)
    timeout 300 "$FSGD" "$@" >"$tmp/$name.log" 2>&1 || rc=$?
    local took
    took=$(echo "$(date +%s.%N) - $t0" | bc)
    [ $rc -eq 4 ] || { echo "$name: exit $rc, not 4:"; cat "$tmp/$name.log"; exit 1; }
    grep -q "brokers $tls: no connection .*$pat" "$tmp/$name.log" ||
        { echo "$name: the message does not name the broker and '$pat':"; cat "$tmp/$name.log"; exit 1; }
    echo "ok: $name: exit 4 after $took s: $(grep -o "no connection.*" "$tmp/$name.log" | cut -c1-160)"
}
WRONG_CA=(--kafka-opt security.protocol=SSL --kafka-opt "ssl.ca.location=$SEC/other-ca.pem")
printf '1 1:1\n' >"$tmp/rows.svm"
expect_refused run-wrong-ca "certificate verify failed.*(_SSL)" \
    run "${COMMON[@]}" --brokers "$tls" --name "$(job_name tls-ca)" "${WRONG_CA[@]}"
expect_refused produce-wrong-ca "certificate verify failed" \
    produce --brokers "$tls" --name "$(job_name tls-ca)" "${WRONG_CA[@]}" "$tmp/rows.svm"
expect_refused aggregator-wrong-ca "certificate verify failed" \
    aggregator --brokers "$tls" --name "$(job_name tls-ca)" --data "$tmp/rows.svm" "${WRONG_CA[@]}"
expect_refused worker-wrong-ca "certificate verify failed" \
    worker --brokers "$tls" --name "$(job_name tls-ca)" --id 1 "${WRONG_CA[@]}"
expect_refused assemble-wrong-ca "certificate verify failed" \
    model assemble --brokers "$tls" --name "$(job_name tls-ca)" --out "$tmp/never.fsgd" "${WRONG_CA[@]}"
[ ! -e "$tmp/never.fsgd" ] || { echo "assemble wrote a model without a connection"; exit 1; }
# PLAINTEXT to the TLS port: the broker never answers a request in clear,
# so only the bound ends the wait (kept short here)
expect_refused run-plaintext "security.protocol" \
    run "${COMMON[@]}" --brokers "$tls" --name "$(job_name tls-plain)" --connect-timeout-ms 3000
