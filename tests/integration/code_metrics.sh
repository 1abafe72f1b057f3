#!/usr/bin/env bash
# Holds the tree to tests/tools/code_metrics.baseline (issue 41): no count
# there (public headers, public functions only tests use, functions over 100
# lines, functions of more than 8 parameters, private monotonic clocks, the
# lines of the biggest files, ...) may grow. A change that lowers one lowers
# the baseline with it:
#     python3 tests/tools/code_metrics.py --counts --write tests/tools/code_metrics.baseline
# (and a change that must raise one says why in its commit).
set -euo pipefail
# sanitizers: leave out: a static check of the sources; it runs no fsgd code
cd "$(dirname "$0")/../.."
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

python3 tests/tools/code_metrics.py --counts --check tests/tools/code_metrics.baseline > "$tmp/now" \
    || fail "a count grew past tests/tools/code_metrics.baseline (above); shrink it or lower the baseline"
grep -q '^public_headers [1-9]' "$tmp/now" || fail "no public headers counted: $(cat "$tmp/now")"

# The check can fail: a baseline one below today's count of functions over
# 100 lines is exceeded, and says which count.
n=$(awk '$1 == "functions_over_100_lines" { print $2 }' "$tmp/now")
[ "$n" -gt 0 ] || fail "no function over 100 lines counted"
sed "s/^functions_over_100_lines .*/functions_over_100_lines $((n - 1))/" \
    tests/tools/code_metrics.baseline > "$tmp/lower"
if python3 tests/tools/code_metrics.py --counts --check "$tmp/lower" > /dev/null 2> "$tmp/err"; then
    fail "a baseline below the count passed"
fi
grep -q "functions_over_100_lines grew from $((n - 1)) to $n" "$tmp/err" || fail "unclear message: $(cat "$tmp/err")"
echo "code_metrics: ok ($(tr '\n' ' ' < "$tmp/now"))"
