#!/usr/bin/env bash
# The strategies table (issues 13 and 14): every compression strategy on the
# dist_net workload (tests/bench/dist_net.sh: 2^20 dims, Zipf rows, 4
# workers) over emulated 1 Gbit/s links on the embedded cluster, in one run:
# bytes up and down per worker per step, time to the target loss, test AUC,
# each against none. The target is a training loss of 0.6 (DIST_NET_TARGET):
# the sparsifying strategies regularize, and never reach none's 0.45 while
# their test logloss is lower than none's (none overfits this data).
# GradiVeQ gets phases short enough for a 112-step run (the paper's L_t =
# 100, L_c = 400 are longer than the whole job).
set -eu
export DIST_NET_CODECS=${STRATEGIES:-"none fastsgd topk gtopk efsign sketchml mqgrad gradiveq:warmup=10,lt=20,lc=40"}
export DIST_NET_WORKERS=${DIST_NET_WORKERS:-4}
export DIST_NET_LINKS=${DIST_NET_LINKS:-1gbit}
export DIST_NET_DIMS=${DIST_NET_DIMS:-1048576}
export DIST_NET_BROKERS=${DIST_NET_BROKERS:-mock}
export DIST_NET_TARGET=${DIST_NET_TARGET:-0.6}
export DIST_NET_L2=${DIST_NET_L2:-0.003}
exec bash "$(dirname "$0")/dist_net.sh"
