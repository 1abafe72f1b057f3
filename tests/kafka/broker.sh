#!/usr/bin/env bash
# A real Apache Kafka broker (4.x, KRaft, combined broker+controller nodes) on
# 127.0.0.1 for the integration suite and the network benchmark.
#
#   tests/kafka/broker.sh install             jars into build/kafka/lib (Maven; cached in ~/.m2)
#   tests/kafka/broker.sh check               exit 0 when java and mvn are there, else say what is missing
#   tests/kafka/broker.sh start DIR [N]       format N nodes (1 or 3) under DIR, start them, wait until
#                                             every node answers; prints "brokers=HOST:PORT,..."
#   tests/kafka/broker.sh stop DIR            stop every node of DIR (TERM, then KILL after 30 s)
#   tests/kafka/broker.sh brokers DIR         the bootstrap list
#   tests/kafka/broker.sh kill DIR K          kill -9 node K (1-based)
#   tests/kafka/broker.sh stop-node DIR K     stop node K (TERM, then KILL), its log dir kept
#   tests/kafka/broker.sh start-node DIR K    start node K again on its log dir, wait until it answers
#   tests/kafka/broker.sh wait DIR [N]        wait until N nodes (default: all) are up in the metadata
#   tests/kafka/broker.sh leader BROKERS TOPIC [PARTITION]   node id leading the partition (default 0)
#   tests/kafka/broker.sh alter-topic BROKERS TOPIC k=v[,k=v]   change topic configs
#   tests/kafka/broker.sh delete-records BROKERS TOPIC PARTITION OFFSET
#                                             move the partition's log start to OFFSET (as retention does)
#   tests/kafka/broker.sh secure DIR          the secure listeners: prints "tls=HOST:PORT,..." and
#                                             "sasl_ssl=HOST:PORT,...", or why there are none (exit 1)
#
# Each node listens on free loopback ports: PLAINTEXT for clients, CONTROLLER,
# and, where openssl is installed, SSL and SASL_SSL (SCRAM-SHA-256, PLAIN) for the
# security tests; DIR/ports keeps them so a node restarts on the same ones.
# DIR/security holds what those tests need: ca.pem (the CA that signed the
# brokers' certificate, for IP 127.0.0.1), other-ca.pem (a CA that did not),
# scram.user and scram.password (mode 600; a user made at format time, also
# known to PLAIN). FSGD_KAFKA_VERSION picks another broker version than the
# pom's (4.1.1), into build/kafka-VERSION/lib: 3.9.1 for the SCRAM test
# (librdkafka before 2.6.1 cannot do SCRAM with Kafka 4: librdkafka#4895).
# The JVM heap is small
# (FSGD_KAFKA_HEAP, default -Xmx512m) because CI machines have 2 cores and
# other work on them. Logs: DIR/nodeK/server.log.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
VERSION=${FSGD_KAFKA_VERSION:-}
LIB=${FSGD_KAFKA_LIB:-$ROOT/build/kafka${VERSION:+-$VERSION}/lib}
HEAP=${FSGD_KAFKA_HEAP:--Xmx512m -Xms128m}
START_TIMEOUT=${FSGD_KAFKA_START_TIMEOUT:-120}

die() { echo "broker.sh: $*" >&2; exit 1; }

check() {
    local miss=()
    command -v java >/dev/null || miss+=(java)
    command -v mvn >/dev/null || miss+=(mvn)
    command -v kcat >/dev/null || miss+=(kcat)
    if [ ${#miss[@]} -gt 0 ]; then
        echo "real Kafka broker unavailable: ${miss[*]} not installed (scripts/install-deps.sh installs them)"
        return 1
    fi
}

install() {
    check >&2 || exit 1
    # The stamp names the pom's content: a changed pom fetches again, an
    # unchanged one does not even start Maven.
    local sum
    sum=$( (cat "$HERE/pom.xml"; echo "$VERSION") | cksum | cut -d' ' -f1)
    if [ -f "$LIB/.pom-$sum" ] && ls "$LIB"/kafka_2.13-*.jar >/dev/null 2>&1; then
        return 0
    fi
    rm -rf "$LIB"
    mkdir -p "$LIB"
    mvn -q -B -f "$HERE/pom.xml" -Dkafka.lib="$LIB" ${VERSION:+-Dkafka.version="$VERSION"} dependency:copy-dependencies >"$LIB/../mvn.log" 2>&1 ||
        { tail -20 "$LIB/../mvn.log" >&2; die "mvn dependency:copy-dependencies failed (log: $LIB/../mvn.log)"; }
    ls "$LIB"/kafka_2.13-"${VERSION:-}"*.jar >/dev/null 2>&1 || die "Maven ran but $LIB has no kafka_2.13-${VERSION:-} jar"
    touch "$LIB/.pom-$sum"
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

nodes_of() { wc -l <"$1/ports"; }
port_of() { sed -n "${2}p" "$1/ports" | cut -d' ' -f1; }
cport_of() { sed -n "${2}p" "$1/ports" | cut -d' ' -f2; }
tport_of() { sed -n "${2}p" "$1/ports" | cut -s -d' ' -f3; } # SSL
sport_of() { sed -n "${2}p" "$1/ports" | cut -s -d' ' -f4; } # SASL_SSL
secure_of() { [ -f "$1/security/ca.pem" ] && [ -n "$(tport_of "$1" 1)" ]; }

# The certificates and the SCRAM user of a cluster's secure listeners: a CA,
# the brokers' key and certificate (one for all nodes: they all listen on
# 127.0.0.1) in a PKCS12 key store, and a second CA that signed nothing, for
# the tests of a wrong trust store. Short-lived: a test cluster lives minutes.
make_security() { # DIR
    local s=$1/security
    mkdir -p "$s"
    chmod 700 "$s"
    (
        set -e
        cd "$s"
        ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
        openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -days 2 -subj /CN=fsgd-test-ca
        openssl req -x509 "${ec[@]}" -keyout other-ca.key -out other-ca.pem -days 2 -subj /CN=fsgd-other-ca
        openssl req "${ec[@]}" -keyout broker.key -out broker.csr -subj /CN=127.0.0.1
        # librdkafka checks the address it connected to (127.0.0.1) against
        # the certificate's names
        printf '%s\n' 'subjectAltName=IP:127.0.0.1,DNS:127.0.0.1,DNS:localhost' 'basicConstraints=CA:FALSE' \
            'extendedKeyUsage=serverAuth' >broker.ext
        openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out broker.pem -days 2 \
            -extfile broker.ext
        openssl rand -hex 16 >store.password
        openssl pkcs12 -export -in broker.pem -inkey broker.key -out broker.p12 -name broker \
            -passout "file:store.password"
        echo fsgd >scram.user
        (umask 077 && openssl rand -hex 12 >scram.password)
    ) >"$s/openssl.log" 2>&1 || { cat "$s/openssl.log" >&2; die "making the test certificates failed"; }
}

brokers() { # DIR [PORT_FUNCTION]
    local dir=$1 of=${2:-port_of} n k out=()
    n=$(nodes_of "$dir")
    for ((k = 1; k <= n; k++)); do out+=("127.0.0.1:$("$of" "$dir" "$k")"); done
    (IFS=,; echo "${out[*]}")
}

secure() { # DIR
    if ! secure_of "$1"; then
        command -v openssl >/dev/null || { echo "no secure listeners: openssl is not installed"; return 1; }
        echo "no secure listeners: the cluster in $1 was started without them"
        return 1
    fi
    echo "tls=$(brokers "$1" tport_of)"
    echo "sasl_ssl=$(brokers "$1" sport_of)"
}

write_props() { # DIR K N
    local dir=$1 k=$2 n=$3 voters=() j
    for ((j = 1; j <= n; j++)); do voters+=("$j@127.0.0.1:$(cport_of "$dir" "$j")"); done
    local rf=$((n < 3 ? n : 3))
    local plain="PLAINTEXT://127.0.0.1:$(port_of "$dir" "$k")" ctl="CONTROLLER://127.0.0.1:$(cport_of "$dir" "$k")"
    local secure="" map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
    if secure_of "$dir"; then
        secure=",SSL://127.0.0.1:$(tport_of "$dir" "$k"),SASL_SSL://127.0.0.1:$(sport_of "$dir" "$k")"
        map+=",SSL:SSL,SASL_SSL:SASL_SSL"
    fi
    mkdir -p "$dir/node$k/data"
    cat >"$dir/node$k/server.properties" <<EOF
process.roles=broker,controller
node.id=$k
controller.quorum.voters=$(IFS=,; echo "${voters[*]}")
listeners=$plain,$ctl$secure
advertised.listeners=$plain$secure
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=$map
log.dirs=$dir/node$k/data
# fsgd creates its topics itself, with the job's settings (KAFKA_FORMAT.md)
auto.create.topics.enable=false
num.partitions=1
default.replication.factor=$rf
min.insync.replicas=1
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# few threads: CI machines have 2 cores
num.network.threads=2
num.io.threads=2
background.threads=2
num.recovery.threads.per.data.dir=1
num.replica.fetchers=1
log.cleaner.threads=1
log.segment.bytes=67108864
# the log cleaner looks for work every second (default 15 s), so a test of
# NAME.model's compaction does not wait long
log.cleaner.backoff.ms=1000
EOF
    if secure_of "$dir"; then
        cat >>"$dir/node$k/server.properties" <<EOF
# the security tests' listeners: SSL, and SASL_SSL with SCRAM-SHA-256 and
# PLAIN for the same user (librdkafka before 2.6.1 cannot do SCRAM with
# Kafka 4.0 and later, librdkafka#4895: FSGD_KAFKA_VERSION=3.9.1 can);
# clients present no certificate
ssl.keystore.type=PKCS12
ssl.keystore.location=$dir/security/broker.p12
ssl.keystore.password=$(cat "$dir/security/store.password")
ssl.client.auth=none
sasl.enabled.mechanisms=SCRAM-SHA-256,PLAIN
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$(cat "$dir/security/scram.user")="$(cat "$dir/security/scram.password")";
EOF
    fi
}

start_node() { # DIR K
    local dir=$1 k=$2
    [ -f "$dir/node$k/server.properties" ] || die "no node $k under $dir"
    local pidf="$dir/node$k/pid"
    if [ -f "$pidf" ] && kill -0 "$(cat "$pidf")" 2>/dev/null; then die "node $k already running (pid $(cat "$pidf"))"; fi
    # shellcheck disable=SC2086
    nohup java $HEAP -XX:+UseSerialGC -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
        -Dlog4j2.configurationFile="$HERE/log4j2.properties" -Dkafka.logs.dir="$dir/node$k" \
        -cp "$LIB/*" kafka.Kafka "$dir/node$k/server.properties" >>"$dir/node$k/server.log" 2>&1 </dev/null &
    echo $! >"$pidf"
}

up_count() { # DIR: nodes listed in the cluster metadata, asked of any node
    local out
    out=$(kcat -L -b "$(brokers "$1")" -m 3 2>/dev/null | sed -n 's/^ *\([0-9]*\) brokers:$/\1/p' | head -1) || true
    echo "${out:-0}"
}

wait_up() { # DIR WANT
    local dir=$1 want=$2 i k n
    n=$(nodes_of "$dir")
    for ((i = 0; i < START_TIMEOUT * 2; i++)); do
        for ((k = 1; k <= n; k++)); do
            local pidf="$dir/node$k/pid"
            if [ -f "$pidf" ] && ! kill -0 "$(cat "$pidf")" 2>/dev/null && [ ! -f "$dir/node$k/stopped" ]; then
                tail -20 "$dir/node$k/server.log" >&2
                die "node $k exited while starting (log: $dir/node$k/server.log)"
            fi
        done
        [ "$(up_count "$dir")" -ge "$want" ] && return 0
        sleep 0.5
    done
    die "$want node(s) not up after ${START_TIMEOUT} s (logs: $dir/node*/server.log)"
}

# One try at starting the cluster in DIR (empty) on new free ports: 0, or
# non-zero when a node exited while starting or the cluster was not up.
start_once() { # DIR N
    local dir=$1 n=$2 k
    : >"$dir/ports"
    local scram=()
    if command -v openssl >/dev/null; then
        for ((k = 1; k <= n; k++)); do echo "$(free_port) $(free_port) $(free_port) $(free_port)" >>"$dir/ports"; done
        make_security "$dir"
        scram=(--add-scram "SCRAM-SHA-256=[name=$(cat "$dir/security/scram.user"),password=$(cat "$dir/security/scram.password")]")
    else
        for ((k = 1; k <= n; k++)); do echo "$(free_port) $(free_port)" >>"$dir/ports"; done
    fi
    local cid
    cid=$(java -cp "$LIB/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)
    [ -n "$cid" ] || die "kafka.tools.StorageTool random-uuid printed nothing"
    for ((k = 1; k <= n; k++)); do
        write_props "$dir" "$k" "$n"
        java -Xmx256m -Dlog4j2.configurationFile="$HERE/log4j2.properties" -cp "$LIB/*" kafka.tools.StorageTool \
            format -t "$cid" -c "$dir/node$k/server.properties" ${scram[@]+"${scram[@]}"} >"$dir/node$k/format.log" 2>&1 ||
            { cat "$dir/node$k/format.log" >&2; die "formatting node $k failed"; }
    done
    for ((k = 1; k <= n; k++)); do start_node "$dir" "$k"; done
    (wait_up "$dir" "$n") # its die ends the subshell: the caller decides
}

start() { # DIR N
    local dir=$1 n=${2:-1} attempt
    [ "$n" = 1 ] || [ "$n" = 3 ] || die "start: 1 or 3 nodes, not $n"
    check >&2 || exit 1
    ls "$LIB"/kafka_2.13-*.jar >/dev/null 2>&1 || die "no broker jars in $LIB: run tests/kafka/broker.sh install"
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    [ -f "$dir/ports" ] && die "$dir already holds a cluster (stop it, then remove the folder)"
    # free_port hands out ports the kernel also gives to outgoing connections:
    # one may be taken between the pick and a node's bind (the node exits in
    # Acceptor.openServerSocket). Then the whole cluster starts again on new ports.
    for attempt in 1 2 3; do
        if start_once "$dir" "$n"; then
            echo "brokers=$(brokers "$dir")"
            return 0
        fi
        stop "$dir"
        grep -qs "openServerSocket\|Address already in use" "$dir"/node*/server.log ||
            die "the cluster did not start (logs: $dir/node*/server.log)"
        echo "broker.sh: a node's port was taken before it could bind it; starting again on new ports" \
            "(attempt $((attempt + 1)) of 3)" >&2
        rm -rf "${dir:?}"/*
    done
    die "the cluster did not start: a port was taken each of 3 times"
}

stop_node() { # DIR K
    local dir=$1 k=$2 pidf="$1/node$2/pid" pid i
    [ -f "$pidf" ] || return 0
    pid=$(cat "$pidf")
    touch "$dir/node$k/stopped"
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        # a controlled shutdown moves leaders away first: seconds, not more
        for ((i = 0; i < 300; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then
            echo "broker.sh: node $k (pid $pid) ignored TERM for 30 s; killing it" >&2
            kill -KILL "$pid" 2>/dev/null || true
            for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        fi
    fi
    rm -f "$pidf"
}

stop() { # DIR: the nodes in parallel (a 3-node controlled shutdown otherwise takes the sum)
    local dir=$1 n k pids=()
    [ -f "$dir/ports" ] || return 0
    n=$(nodes_of "$dir")
    for ((k = 1; k <= n; k++)); do stop_node "$dir" "$k" & pids+=($!); done
    for k in "${pids[@]}"; do wait "$k" || true; done
}

cmd=${1:-}
shift || true
case "$cmd" in
install) install ;;
check) check ;;
start) [ $# -ge 1 ] || die "start DIR [N]"; start "$1" "${2:-1}" ;;
stop) [ $# -ge 1 ] || die "stop DIR"; stop "$1" ;;
brokers) brokers "$1" ;;
secure) [ $# -ge 1 ] || die "secure DIR"; secure "$(cd "$1" && pwd)" ;;
kill)
    pidf="$1/node$2/pid"
    [ -f "$pidf" ] || die "node $2 is not running"
    touch "$1/node$2/stopped"
    kill -KILL "$(cat "$pidf")"
    rm -f "$pidf"
    ;;
stop-node) stop_node "$1" "$2" ;;
start-node)
    rm -f "$1/node$2/stopped"
    start_node "$1" "$2"
    wait_up "$1" "$(nodes_of "$1")"
    ;;
wait) wait_up "$1" "${2:-$(nodes_of "$1")}" ;;
leader)
    kcat -L -b "$1" -t "$2" -m 5 2>/dev/null |
        sed -n "s/^ *partition ${3:-0}, leader \([0-9-]*\),.*/\1/p" | head -1
    ;;
alter-topic)
    [ $# -eq 3 ] || die "alter-topic BROKERS TOPIC k=v[,k=v]"
    java -Xmx256m -Dlog4j2.configurationFile="$HERE/log4j2.properties" -cp "$LIB/*" kafka.admin.ConfigCommand \
        --bootstrap-server "$1" --alter --entity-type topics --entity-name "$2" --add-config "$3" 2>&1 |
        grep -v " INFO " || true
    ;;
delete-records)
    [ $# -eq 4 ] || die "delete-records BROKERS TOPIC PARTITION OFFSET"
    f=$(mktemp)
    printf '{"version":1,"partitions":[{"topic":"%s","partition":%d,"offset":%d}]}\n' "$2" "$3" "$4" >"$f"
    java -Xmx256m -Dlog4j2.configurationFile="$HERE/log4j2.properties" -cp "$LIB/*" \
        org.apache.kafka.tools.DeleteRecordsCommand --bootstrap-server "$1" --offset-json-file "$f" 2>&1 |
        grep -v " INFO " || true
    rm -f "$f"
    ;;
*) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
