#!/usr/bin/env bash
# SASL for real (issue 27): the real broker's SASL_SSL listener, with a user
# that tests/kafka/broker.sh made at format time (SCRAM-SHA-256 and PLAIN).
# The password reaches fsgd only as a file (--kafka-opt
# sasl.password_file=PATH, mode 600): never on a command line, in a log or
# in the metrics. A job trains with SCRAM-SHA-256 where this librdkafka can
# (2.6.1 and later: older ones send a nonce Kafka 4 refuses, librdkafka#4895
# — there fsgd must say so, and the job trains with PLAIN over the same TLS;
# kafka_scram.sh trains such a librdkafka over SCRAM with Kafka 3.9.1). A
# wrong password fails with exit 4 naming the broker and the cause; a
# password file others may read is refused (exit 2).
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
real_only "the embedded (mock) cluster has no SASL listener"
needs_cmd openssl
secure=$("$BROKER_SH" secure "$FSGD_KAFKA_DIR") || skip "$secure"
sasl=$(sed -n 's/^sasl_ssl=//p' <<<"$secure")
SEC=$FSGD_KAFKA_DIR/security
password=$(cat "$SEC/scram.password")
(umask 077 && cp "$SEC/scram.password" "$tmp/pw" && echo "not-$password" >"$tmp/wrong-pw")
opts() { # MECHANISM PASSWORD_FILE
    echo --kafka-opt security.protocol=SASL_SSL --kafka-opt "ssl.ca.location=$SEC/ca.pem" \
        --kafka-opt "sasl.mechanism=$1" --kafka-opt "sasl.username=$(cat "$SEC/scram.user")" \
        --kafka-opt "sasl.password_file=$2"
}
no_secret() { # FILE...: the password appears in none of them
    local f
    for f in "$@"; do
        ! grep -qF -- "$password" "$f" || { echo "the SASL password is written in $f"; exit 1; }
    done
}

ref=$(reference_auc)
train() { # MECHANISM LOG: exit status of a job over SASL_SSL
    local rc=0
    # shellcheck disable=SC2046
    "$FSGD" run "${COMMON[@]}" --brokers "$sasl" --name "$(job_name sasl)" --workers 2 $(opts "$1" "$tmp/pw") \
        --metrics-json "$tmp/$1.json" >"$2" 2>&1 || rc=$?
    return $rc
}
rc=0
train SCRAM-SHA-256 "$tmp/scram.log" || rc=$?
mech=SCRAM-SHA-256
if [ $rc -ne 0 ]; then
    # only the librdkafka of librdkafka#4895 may fail here, and it must say why
    [ $rc -eq 4 ] && grep -q "older than 2.6.1, whose SCRAM Kafka 4.0 and later refuse" "$tmp/scram.log" ||
        { echo "SCRAM-SHA-256 with the right password: exit $rc"; cat "$tmp/scram.log"; exit 1; }
    grep -q "brokers $sasl: no connection .*(_AUTHENTICATION)" "$tmp/scram.log" ||
        { echo "SCRAM failure without broker and cause:"; cat "$tmp/scram.log"; exit 1; }
    echo "note: this librdkafka cannot do SCRAM with Kafka 4 (librdkafka#4895), as fsgd said; training with PLAIN over SASL_SSL (kafka_scram.sh: SCRAM with Kafka 3.9.1)"
    no_secret "$tmp/scram.log"
    mech=PLAIN
    train PLAIN "$tmp/plain.log" || { echo "training over SASL_SSL (PLAIN) failed:"; cat "$tmp/plain.log"; exit 1; }
fi
log=$tmp/$([ $mech = PLAIN ] && echo plain || echo scram).log
check_metrics "$tmp/$mech.json" "$ref" 0.005 || { echo "over SASL_SSL ($mech): wrong rows or AUC"; exit 1; }
no_secret "$log" "$tmp/$mech.json"
echo "ok: trained over SASL_SSL with $mech at $sasl"

# a wrong password: exit 4 naming the broker and the cause
rc=0
t0=$(date +%s.%N)
# shellcheck disable=SC2046
timeout 300 "$FSGD" run "${COMMON[@]}" --brokers "$sasl" --name "$(job_name sasl-bad)" $(opts "$mech" "$tmp/wrong-pw") \
    >"$tmp/wrong.log" 2>&1 || rc=$?
took=$(echo "$(date +%s.%N) - $t0" | bc)
[ $rc -eq 4 ] || { echo "wrong password: exit $rc, not 4"; cat "$tmp/wrong.log"; exit 1; }
grep -q "brokers $sasl: no connection .*SASL authentication error.*(_AUTHENTICATION)" "$tmp/wrong.log" ||
    { echo "wrong password: the message does not name the broker and the cause:"; cat "$tmp/wrong.log"; exit 1; }
grep -qF "not-$password" "$tmp/wrong.log" && { echo "the wrong password was printed"; exit 1; }
echo "ok: wrong password: exit 4 after $took s: $(grep -o "no connection.*" "$tmp/wrong.log" | cut -c1-150)"
# fsgd model assemble too, with the same bound and message
rc=0
# shellcheck disable=SC2046
timeout 300 "$FSGD" model assemble --brokers "$sasl" --name "$(job_name sasl-bad)" --out "$tmp/never.fsgd" \
    $(opts "$mech" "$tmp/wrong-pw") >"$tmp/wrong-asm.log" 2>&1 || rc=$?
[ $rc -eq 4 ] && grep -q "brokers $sasl: no connection .*SASL authentication error.*(_AUTHENTICATION)" "$tmp/wrong-asm.log" ||
    { echo "assemble, wrong password: exit $rc"; cat "$tmp/wrong-asm.log"; exit 1; }
[ ! -e "$tmp/never.fsgd" ] && no_secret "$tmp/wrong-asm.log"
echo "ok: model assemble, wrong password: exit 4"

# a password file others may read: refused before anything starts
chmod 644 "$tmp/pw"
rc=0
# shellcheck disable=SC2046
"$FSGD" worker --brokers "$sasl" --name "$(job_name sasl-mode)" $(opts "$mech" "$tmp/pw") >"$tmp/mode.log" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "sasl.password_file: '$tmp/pw' has mode 0644" "$tmp/mode.log" ||
    { echo "a mode 644 password file: exit $rc"; cat "$tmp/mode.log"; exit 1; }
grep -q "connecting to" "$tmp/mode.log" && { echo "connected before checking the password file"; exit 1; }
no_secret "$tmp/mode.log"
echo "ok: a password file others may read is refused (exit 2)"
