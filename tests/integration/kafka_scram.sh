#!/usr/bin/env bash
# SASL/SCRAM for real (issue 27), with the librdkafka this machine has. One
# before 2.6.1 (Debian bookworm's 2.0.2) cannot do SCRAM with Kafka 4
# (librdkafka#4895: kafka_sasl.sh shows fsgd saying so) but can with Kafka
# 3.x, so this script starts its own Apache Kafka 3.9.1 broker
# (FSGD_KAFKA_VERSION=3.9.1 tests/kafka/broker.sh: one node, a SASL_SSL
# listener with SCRAM-SHA-256, a user made at format time). A job of two
# workers trains over SCRAM-SHA-256 to the reference AUC; a wrong password
# fails with exit 4 naming the broker and the cause; the password, given
# only as a mode-600 file, appears in no log and no metrics.
# It runs in the real-broker pass (FSGD_KAFKA=real; the broker at
# FSGD_BROKERS is not used); by hand:
#   FSGD_KAFKA=real FSGD_BROKERS=none bash tests/integration/kafka_scram.sh
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
real_only "starts its own Kafka 3.9.1 broker, in the real-broker pass"
needs_cmd openssl
why=$("$BROKER_SH" check) || skip "$why"
export FSGD_KAFKA_VERSION=3.9.1
# From here on Java, Maven and openssl are there: a broker that cannot be
# fetched or started is a failure, not a skip.
"$BROKER_SH" install >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; echo "FAIL: Kafka $FSGD_KAFKA_VERSION could not be fetched"; exit 1; }
K=$tmp/kafka-$FSGD_KAFKA_VERSION
trap '"$BROKER_SH" stop "$K" >/dev/null 2>&1 || true; cleanup' EXIT
t0=$SECONDS
out=$("$BROKER_SH" start "$K" 1 2>&1) ||
    { echo "$out" | tail -20; echo "FAIL: Kafka $FSGD_KAFKA_VERSION did not start"; exit 1; }
secure=$("$BROKER_SH" secure "$K") || { echo "FAIL: $secure"; exit 1; }
sasl=$(sed -n 's/^sasl_ssl=//p' <<<"$secure")
echo "Kafka $FSGD_KAFKA_VERSION up in $((SECONDS - t0)) s: SASL_SSL at $sasl"

SEC=$K/security
password=$(cat "$SEC/scram.password")
(umask 077 && cp "$SEC/scram.password" "$tmp/pw" && echo "not-$password" >"$tmp/wrong-pw")
opts() { # PASSWORD_FILE
    echo --kafka-opt security.protocol=SASL_SSL --kafka-opt "ssl.ca.location=$SEC/ca.pem" \
        --kafka-opt sasl.mechanism=SCRAM-SHA-256 --kafka-opt "sasl.username=$(cat "$SEC/scram.user")" \
        --kafka-opt "sasl.password_file=$1"
}
no_secret() { # FILE...: the password appears in none of them
    local f
    for f in "$@"; do
        ! grep -qF -- "$password" "$f" || { echo "the SCRAM password is written in $f"; exit 1; }
    done
}

ref=$(reference_auc)
rc=0
t0=$SECONDS
# shellcheck disable=SC2046
"$FSGD" run "${COMMON[@]}" --brokers "$sasl" --name "$(job_name scram)" --workers 2 $(opts "$tmp/pw") \
    --metrics-json "$tmp/scram.json" >"$tmp/scram.log" 2>&1 || rc=$?
[ $rc -eq 0 ] || { echo "SCRAM-SHA-256 with the right password: exit $rc"; cat "$tmp/scram.log"; exit 1; }
check_metrics "$tmp/scram.json" "$ref" 0.005 || { echo "over SCRAM-SHA-256: wrong rows or AUC"; exit 1; }
no_secret "$tmp/scram.log" "$tmp/scram.json"
echo "ok: trained over SASL_SSL with SCRAM-SHA-256 at $sasl (Kafka $FSGD_KAFKA_VERSION) in $((SECONDS - t0)) s"

# a wrong password: exit 4 naming the broker and the cause
rc=0
t0=$(date +%s.%N)
# shellcheck disable=SC2046
timeout 300 "$FSGD" run "${COMMON[@]}" --brokers "$sasl" --name "$(job_name scram-bad)" $(opts "$tmp/wrong-pw") \
    >"$tmp/wrong.log" 2>&1 || rc=$?
took=$(echo "$(date +%s.%N) - $t0" | bc)
[ $rc -eq 4 ] || { echo "wrong SCRAM password: exit $rc, not 4"; cat "$tmp/wrong.log"; exit 1; }
grep -q "brokers $sasl: no connection .*SASL authentication error.*SCRAM-SHA-256.*(_AUTHENTICATION)" "$tmp/wrong.log" ||
    { echo "wrong SCRAM password: the message does not name the broker and the cause:"; cat "$tmp/wrong.log"; exit 1; }
grep -qF "not-$password" "$tmp/wrong.log" && { echo "the wrong password was printed"; exit 1; }
no_secret "$tmp/wrong.log"
echo "ok: wrong SCRAM password: exit 4 after $took s: $(grep -o "no connection.*" "$tmp/wrong.log" | cut -c1-160)"
