#!/usr/bin/env bash
# The strategies table (issues 13 and 14): every compression strategy on the
# dist_net workload (tests/bench/dist_net.sh: 80,000 rows of 2^20 dims, Zipf
# rows, batch 6000, 8 epochs, 4 workers) over emulated 1 Gbit/s links on the
# embedded cluster, in one run: bytes up and down per worker per step, time
# to the target loss, test AUC, each against none; the last lines are the
# table itself (tests/bench/lib/strategies_table.py) and whether every
# strategy's AUC is within 0.01 of none's.
#
# The workload, the same for every strategy (printed in the
# "bench dist_net_data" line):
# - Adam lr 0.01, L2 λ = 0.003 on the mean loss (DIST_NET_L2). Without L2
#   (dist_net.sh's default, kept for issue 18's figures) none overfits 2^20
#   weights on 80,000 rows (`fsgd train`: test AUC 0.693 after epoch 3, 0.679
#   after 8), while every sparsifying strategy regularizes and "beats" it by
#   0.04-0.07. λ = 1/n_train (fsgd train's default, LIBLINEAR's C = 1) barely
#   changes that (0.682); λ = 0.003 is the best of 1e-4, 1e-3, 3e-3, 1e-2 for
#   none with `fsgd train` (AUC 0.756 after 8 epochs, still rising, training
#   loss 0.48). efsign, whose workers run the optimizer, gets λθ in the
#   workers' gradients (strategy/FORMAT.md).
# - Target: a training loss (mean of the last 8 steps) of 0.6
#   (DIST_NET_TARGET), which every strategy reaches; none's loss ends near
#   0.48 with this λ.
# - Strategy parameters are the defaults except where the list says: topk
#   ratio 0.1 (the FastSGD paper gives no k for its Top-k competitor; at the
#   codec default 0.01 topk ends at AUC 0.738, 0.019 below none: 0.03 gives
#   0.744, 0.1 gives 0.754; the downlink is not the cause, --downlink full
#   gives 0.739 at 0.01), and GradiVeQ phases short enough for a 112-step run
#   (the paper's L_t = 100, L_c = 400 are longer than the whole job).
# STRATEGIES replaces the list (e.g. STRATEGIES="none efsign"); every
# DIST_NET_* knob of dist_net.sh still applies. Needs root for the network
# namespaces (without, dist_net.sh runs loopback only and says so).
set -euo pipefail
export DIST_NET_CODECS=${STRATEGIES:-"none fastsgd topk:ratio=0.1 gtopk efsign sketchml mqgrad gradiveq:warmup=10,lt=20,lc=40"}
export DIST_NET_WORKERS=${DIST_NET_WORKERS:-4}
export DIST_NET_LINKS=${DIST_NET_LINKS:-1gbit}
export DIST_NET_DIMS=${DIST_NET_DIMS:-1048576}
export DIST_NET_BROKERS=${DIST_NET_BROKERS:-mock}
export DIST_NET_TARGET=${DIST_NET_TARGET:-0.6}
export DIST_NET_L2=${DIST_NET_L2:-0.003}
export DIST_NET_LR=${DIST_NET_LR:-0.01}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
bash "$(dirname "$0")/dist_net.sh" | tee "$out" || status=$?
/usr/bin/python3 "$(dirname "$0")/lib/strategies_table.py" 0.01 <"$out"
exit $status
