#!/usr/bin/env bash
# The paper-regime bench's cost model (tests/bench/lib/cost_model.py, issue
# 26): its arithmetic on fixed inputs worked out by hand
# (tests/bench/lib/test_cost_model.py), so the predictions paper_regime.sh
# prints rest on checked sums.
set -euo pipefail
. "$(dirname "$0")/lib/skip.bash"
needs_cmd python3
python3 "$(dirname "$0")/../bench/lib/test_cost_model.py"
