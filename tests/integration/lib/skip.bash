# Sourced by integration scripts: a script that cannot run here exits with
# status 77, which tests/run_tests.sh counts as skipped (never as passed).
# DATA must be set (data_dir) before needs_data.

# data_dir: prints the data sets' folder: $FSGD_DATA if set, else the
# repository's data/sets unpacked into $BUILD/datasets (scripts/unpack-data.sh,
# checksums checked; a bad or missing set fails the script).
data_dir() {
    [ -z "${FSGD_DATA:-}" ] || { echo "$FSGD_DATA"; return; }
    local root b=${BUILD:-build}
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
    case $b in /*) ;; *) b=$root/$b ;; esac
    "$root/scripts/unpack-data.sh" "$b/datasets"
}

# needs_data NAME...: every data set must be readable in $DATA. Missing from
# a folder scripts/unpack-data.sh filled (it has a .sha256sums stamp), a set
# is one the repository should ship: a failure. Missing from a folder given by
# FSGD_DATA, it is a skip.
needs_data() {
    local f
    for f in "$@"; do
        [ -r "$DATA/$f" ] && continue
        if [ -f "$DATA/.sha256sums" ]; then
            echo "FAIL: $DATA/$f not found: add it to data/sets (README, SHA256SUMS) or generate it"; exit 1
        fi
        echo "skipped: $DATA/$f not found (FSGD_DATA=$DATA)"; exit 77
    done
}

# needs_cmd CMD...: every command must be installed.
needs_cmd() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null || { echo "skipped: $c is not installed"; exit 77; }
    done
}
