#!/usr/bin/env bash
# The paper-regime bench's cost model (tests/bench/lib/cost_model.py, issue
# 26): its arithmetic on fixed inputs worked out by hand
# (tests/bench/lib/test_cost_model.py), the per-key costs it reads from
# single-process fsgd train metrics at each feature count and carries to
# another dimension, and the report's reading of those calibration files,
# so the predictions paper_regime.sh prints rest on checked sums.
set -euo pipefail
. "$(dirname "$0")/lib/skip.bash"
needs_cmd python3
python3 "$(dirname "$0")/../bench/lib/test_cost_model.py"
