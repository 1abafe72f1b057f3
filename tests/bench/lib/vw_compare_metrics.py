"""Test AUC and logloss of a prediction file for tests/bench/vw_compare.sh,
the same code for both tools: scikit-learn over the VW test file's labels
(> 0 positive) and the first number of each prediction line (a margin: fsgd
predict's output, VW's -p with --loss_function logistic), through the
logistic function for the logloss.

usage: vw_compare_metrics.py TEST.vw PREDICTIONS   (prints "AUC LOGLOSS")"""
import math
import sys

from sklearn.metrics import log_loss, roc_auc_score

y = [1 if float(l.split(None, 1)[0]) > 0 else 0 for l in open(sys.argv[1]) if l.strip()]
s = [float(l.split()[0]) for l in open(sys.argv[2]) if l.strip()]
assert len(y) == len(s), (len(y), len(s))
p = [1 / (1 + math.exp(-min(max(v, -35.0), 35.0))) for v in s]
print("%.6f %.6f" % (roc_auc_score(y, s), log_loss(y, p)))
