# Sourced by integration scripts: a script that cannot run here exits with
# status 77, which tests/run_tests.sh counts as skipped (never as passed).
# DATA must be set to the shared data sets' directory before needs_data.

# needs_data NAME...: every data set must be readable in $DATA.
needs_data() {
    local f
    for f in "$@"; do
        [ -r "$DATA/$f" ] || { echo "skipped: $DATA/$f not found (set FSGD_DATA to the data sets' directory)"; exit 77; }
    done
}

# needs_cmd CMD...: every command must be installed.
needs_cmd() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null || { echo "skipped: $c is not installed"; exit 77; }
    done
}
