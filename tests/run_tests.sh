#!/usr/bin/env bash
# Runs every unit test binary, replays every fuzz corpus, runs every
# integration script on the embedded Kafka cluster, then the kafka_* scripts
# again on a real Apache Kafka broker, and prints one
# "N passed, N failed, N skipped" line at the end.
#
# The real-broker pass (FSGD_KAFKA_REAL: auto (default), 1 = must run, 0 =
# leave out, only = nothing but the real pass, which must run) starts tests/kafka/broker.sh once with one node for the scripts
# and once with three nodes for those marked "# real-kafka: cluster" (the
# fault tests), and stops them when done, failed or interrupted. Without java,
# mvn or kcat it says so in one line and counts as skipped, except under CI
# (CI=true), where it must run. An integration script that exits 77 is
# skipped (it printed why).
# A test that cannot run here (no GPU, no data set, no clang) is skipped,
# never counted as passed: unit tests report skips in their
# "fsgd-test: NAME: P passed, F failed, S skipped" line.
#
# Under sanitizers (make asan sets FSGD_SANITIZED=1) the suite runs again
# for what the sanitizers can find in fsgd's C code; left out there, and
# counted skipped: a script marked "# sanitizers: leave out: REASON" (static
# checks, a container engine's time) and the real broker's one-node pass
# (the same fsgd code as the embedded cluster's; the three-node fault pass
# stays). CI's time is bounded; these repeat nothing a sanitizer reads.
#
# T=PATTERN (make test T=PATTERN) runs only the unit binaries, fuzz replays
# and integration scripts whose file name contains PATTERN (test_adam,
# kafka_follow, libsvm, ...); FSGD_SUITE=quick runs the unit tests and fuzz
# replays alone (seconds), FSGD_SUITE=full (default) everything. One case of
# a unit binary: build/unit/test_adam CASE (tests/README.md).
set -u
T=${T:-}
SUITE=${FSGD_SUITE:-full}
SANITIZED=${FSGD_SANITIZED:-0}
case "$SUITE" in quick | full) ;; *) echo "FSGD_SUITE must be quick or full, not '$SUITE'"; exit 2 ;; esac
# Integration scripts run FSGD_TEST_JOBS (default 2; 1: one after another)
# at a time: most of a script's time is waiting (group joins, polls), not
# CPU. A script marked "# suite: alone: REASON" (a container engine, the only
# load it assumes) runs with nothing beside it; "# suite: alone on real
# Kafka: REASON" does so in the real-broker pass (it stops a broker the
# others share). Each script runs in a process group of its own with its own
# log, printed whole when it ends; results print in the order scripts end.
JOBS=${FSGD_TEST_JOBS:-2}
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "FSGD_TEST_JOBS must be a whole number of at least 1, not '$JOBS'"; exit 2; }
if [ "$JOBS" -gt 1 ] && ((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] < 501)); then
    echo "note: bash $BASH_VERSION has no wait -n -p (5.1): integration scripts run one at a time"
    JOBS=1
fi
wanted() { [ -z "$T" ] || [[ "$(basename "$1")" == *"$T"* ]]; }
ran_any=0
BUILD=${BUILD:-build}
export FSGD=${FSGD:-bin/fsgd}
# The data sets: the repository's own (data/sets, unpacked and checked into
# $BUILD/datasets) unless FSGD_DATA names another folder.
if [ -z "${FSGD_DATA:-}" ]; then
    FSGD_DATA=$(scripts/unpack-data.sh "$BUILD/datasets") || { echo "FAIL: scripts/unpack-data.sh"; exit 1; }
fi
export FSGD_DATA
BROKER_SH=tests/kafka/broker.sh
passed=0 failed=0 skipped=0 failures=()
logdir=$(mktemp -d)
kdirs=()
finish() {
    local d
    for d in ${kdirs[@]+"${kdirs[@]}"}; do "$BROKER_SH" stop "$d" >/dev/null 2>&1 || true; done
    rm -rf "$logdir"
}
trap finish EXIT
declare -A run_name=() run_tag=() run_t0=() run_log=() # by pid: the running integration scripts
started=0
stop_scripts() { # TERM to every running script's process group, KILL what is left after 30 s
    local p i
    [ ${#run_name[@]} -gt 0 ] || return 0
    for p in "${!run_name[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
    for ((i = 0; i < 300; i++)); do
        for p in "${!run_name[@]}"; do
            # a script that ended is a zombie until waited for, and a zombie
            # still holds its process group
            [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ] || wait "$p" 2>/dev/null
            kill -0 -- "-$p" 2>/dev/null || unset "run_name[$p]"
        done
        [ ${#run_name[@]} -gt 0 ] || return 0
        sleep 0.1
    done
    for p in "${!run_name[@]}"; do kill -KILL -- "-$p" 2>/dev/null || true; done
}
trap 'echo "interrupted: stopping the running scripts and the brokers"; stop_scripts; exit 130' INT TERM HUP
[ -d "$FSGD_DATA" ] || echo "note: test data directory FSGD_DATA=$FSGD_DATA not found: tests that need it are skipped"

real=${FSGD_KAFKA_REAL:-auto}
case "$real" in auto | 0 | 1 | only) ;; *) echo "FSGD_KAFKA_REAL must be auto, 0, 1 or only, not '$real'"; exit 2 ;; esac
for t in "$BUILD"/unit/test_*; do
    [ "$real" != only ] || break
    [ -x "$t" ] || continue
    wanted "$t" || continue
    ran_any=1
    log=$(mktemp)
    "$t" >"$log" 2>&1
    rc=$?
    line=$(grep -E '^fsgd-test: .*: [0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' "$log" | tail -1)
    p=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed.*/\1/' <<<"$line")
    f=$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed.*/\2/' <<<"$line")
    s=$(sed -nE 's/.*, ([0-9]+) skipped$/\1/p' <<<"$line")
    p=${p:-0}; f=${f:-0}; s=${s:-0}
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi   # crashed or asserted outside a test
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    if [ $rc -ne 0 ]; then
        failures+=("$t"); cat "$log"
    else
        echo "ok   $t ($p tests$([ "$s" -gt 0 ] && echo ", $s skipped"))"
        grep -h '^fsgd-test: test data' "$log" || true
    fi
    rm -f "$log"
done

for r in "$BUILD"/fuzz-replay/fuzz_*; do
    [ "$real" != only ] || break
    [ -x "$r" ] || continue
    wanted "$r" || continue
    ran_any=1
    name=$(basename "$r")
    corpus=tests/fuzz/corpus/${name#fuzz_}
    if "$r" "$corpus" >"$logdir/replay.log" 2>&1; then
        passed=$((passed + 1)); echo "ok   $r $(tail -1 "$logdir/replay.log")"
    else
        failed=$((failed + 1)); failures+=("$r"); cat "$logdir/replay.log"
    fi
done

SLOW_PASS_S=${FSGD_SLOW_PASS_S:-120}
# the slowest script passes in ~5 min (compose_up.sh); sanitizers make
# scripts ~2x slower
SCRIPT_LIMIT_S=${FSGD_SCRIPT_LIMIT_S:-$([ "$SANITIZED" = 1 ] && echo 1200 || echo 600)}
start_script() { # SCRIPT TAG: in the background, in a process group of its own
    local s=$1 tag=$2 why
    if [ "$SANITIZED" = 1 ] && why=$(sed -nE 's/^# sanitizers: leave out: //p' "$s" | head -1) && [ -n "$why" ]; then
        skipped=$((skipped + 1)); echo "skip $s$tag: left out under sanitizers: $why"
        return
    fi
    # setsid: one process group to stop on Ctrl-C (a background job of this
    # shell would ignore SIGINT); -w: the script's exit status even where
    # setsid has to fork
    # timeout: a script that hangs (a livelocked job) fails after
    # SCRIPT_LIMIT_S with its output instead of costing CI its hour; it
    # signals the script's whole process group, whose EXIT traps stop what
    # they started
    started=$((started + 1))
    BUILD=$BUILD setsid -w timeout -k 20 "$SCRIPT_LIMIT_S" bash "$s" >"$logdir/integ.$started.log" 2>&1 </dev/null &
    run_name[$!]=$s run_tag[$!]=$tag run_t0[$!]=$SECONDS run_log[$!]=$logdir/integ.$started.log
}
reap_script() { # waits for one running script to end and counts it
    local p= rc=0 s tag took log
    if [ ${#run_name[@]} -eq 1 ]; then
        p=${!run_name[*]}
        wait "$p" || rc=$?
    else
        wait -n -p p "${!run_name[@]}" || rc=$?
    fi
    [ -n "$p" ] || return 0
    s=${run_name[$p]} tag=${run_tag[$p]} took=$((SECONDS - ${run_t0[$p]})) log=${run_log[$p]}
    unset "run_name[$p]" "run_tag[$p]" "run_t0[$p]" "run_log[$p]"
    if [ $rc -eq 0 ]; then
        passed=$((passed + 1)); echo "ok   $s$tag ($took s)"
        # A pass that took minutes shows where its time went (an intermittent
        # stall is otherwise invisible in CI's output).
        if [ "$took" -ge "$SLOW_PASS_S" ]; then
            echo "     slow pass, the end of its output:"
            tail -20 "$log" | sed 's/^/     | /'
        fi
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        failed=$((failed + 1)); failures+=("$s$tag (timed out)")
        echo "FAIL $s$tag: no end after $took s (FSGD_SCRIPT_LIMIT_S=$SCRIPT_LIMIT_S); its output:"
        cat "$log"
    elif [ $rc -eq 77 ]; then
        skipped=$((skipped + 1)); echo "skip $s$tag: $(sed -nE 's/^(SKIP|skipped): //p' "$log" | tail -1)"
    else
        failed=$((failed + 1)); failures+=("$s$tag"); cat "$log"
    fi
    rm -f "$log"
}
run_scripts() { # TAG SCRIPT...: runs and counts them, JOBS at a time
    local tag=$1 s
    shift
    for s in "$@"; do
        if grep -q '^# suite: alone: ' "$s" ||
            { [ "${FSGD_KAFKA:-}" = real ] && grep -q '^# suite: alone on real Kafka: ' "$s"; }; then
            while [ ${#run_name[@]} -gt 0 ]; do reap_script; done
            start_script "$s" "$tag"
            while [ ${#run_name[@]} -gt 0 ]; do reap_script; done
            continue
        fi
        while [ ${#run_name[@]} -ge "$JOBS" ]; do reap_script; done
        start_script "$s" "$tag"
    done
    while [ ${#run_name[@]} -gt 0 ]; do reap_script; done
}

integ=()
for s in tests/integration/*.sh; do
    [ "$real" != only ] && [ "$SUITE" = full ] || break
    [ -f "$s" ] || continue
    wanted "$s" || continue
    ran_any=1
    integ+=("$s")
done
run_scripts "" ${integ[@]+"${integ[@]}"}

# real_pass NODES SCRIPTS...: a fresh cluster of NODES brokers, the scripts on
# it (FSGD_KAFKA=real), the cluster stopped.
real_pass() {
    local nodes=$1 dir s out
    shift
    [ $# -gt 0 ] || return 0 # T= left none of these scripts: no cluster to start
    dir=$(mktemp -d /tmp/fsgd-kafka.XXXXXX)
    kdirs+=("$dir")
    if ! out=$("$BROKER_SH" start "$dir/c" "$nodes" 2>&1); then
        echo "$out" | tail -20
        failed=$((failed + 1)); failures+=("real Kafka: $nodes-broker cluster did not start")
        return
    fi
    echo "real Kafka: $nodes broker(s) at ${out#brokers=}"
    FSGD_KAFKA=real FSGD_BROKERS=${out#brokers=} FSGD_KAFKA_DIR=$dir/c run_scripts " [real, $nodes broker(s)]" "$@"
    "$BROKER_SH" stop "$dir/c"
    rm -rf "$dir"
}

real_scripts=0
for s in tests/integration/kafka_*.sh; do wanted "$s" && real_scripts=$((real_scripts + 1)); done
if [ "$SUITE" = quick ] || [ "$real_scripts" -eq 0 ]; then
    echo "real Kafka pass left out ($([ "$SUITE" = quick ] && echo "FSGD_SUITE=quick" || echo "T=$T names no kafka_ script"))"
elif [ "$real" != 0 ]; then
    if ! why=$("$BROKER_SH" check); then
        if [ "$real" != auto ] || [ "${CI:-}" = true ]; then
            failed=$((failed + 1)); failures+=("real Kafka pass: $why"); echo "FAIL $why"
        else
            skipped=$((skipped + 1)); echo "skip real Kafka pass: $why"
        fi
    elif ! "$BROKER_SH" install >"$logdir/install.log" 2>&1; then
        cat "$logdir/install.log"
        failed=$((failed + 1)); failures+=("real Kafka pass: broker install failed")
    else
        single=() cluster=()
        for s in tests/integration/kafka_*.sh; do
            wanted "$s" || continue
            ran_any=1
            if grep -q '^# real-kafka: cluster' "$s"; then cluster+=("$s"); else single+=("$s"); fi
        done
        if [ "$SANITIZED" = 1 ]; then
            skipped=$((skipped + ${#single[@]}))
            echo "skip the one-node real Kafka pass (${#single[@]} scripts) under sanitizers: the embedded pass ran the same fsgd code"
        else
            real_pass 1 "${single[@]}"
        fi
        real_pass 3 "${cluster[@]}"
    fi
else
    echo "real Kafka pass left out (FSGD_KAFKA_REAL=0)"
fi

if [ -n "$T" ] && [ "$ran_any" -eq 0 ]; then
    echo "T=$T matches no unit binary, fuzz replay or integration script"
    exit 2
fi
for f in "${failures[@]:-}"; do [ -n "$f" ] && echo "FAILED: $f"; done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
