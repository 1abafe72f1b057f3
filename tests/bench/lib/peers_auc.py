"""Test AUC of one tool's prediction file, the same code for every tool in
tests/bench/peers_compare.sh: scikit-learn's roc_auc_score (independent of all
three tools) over the LIBSVM test file's labels (> 0 is positive).

usage: peers_auc.py TEST_LIBSVM FORMAT PREDICTIONS
  FORMAT score      one number per line (first field), larger = more positive:
                    fsgd predict's margins, Vowpal Wabbit's -p output
  FORMAT liblinear  liblinear-predict -b 1: a "labels ..." header, then the
                    probabilities in that order; the column of label 1 is used
Prints the AUC with 6 decimals."""
import sys
from sklearn.metrics import roc_auc_score


def labels(path):
    y = []
    with open(path) as f:
        for line in f:
            line = line.split('#', 1)[0].strip()
            if line:
                y.append(1 if float(line.split(None, 1)[0]) > 0 else 0)
    return y


def scores(path, fmt):
    with open(path) as f:
        if fmt == 'score':
            return [float(l.split()[0]) for l in f if l.strip()]
        if fmt == 'liblinear':
            header = f.readline().split()
            if not header or header[0] != 'labels' or '1' not in header[1:]:
                sys.exit('peers_auc: %s: no "labels ... 1 ..." header (liblinear-predict -b 1)' % path)
            col = header[1:].index('1') + 1
            return [float(l.split()[col]) for l in f if l.strip()]
    sys.exit('peers_auc: unknown format %r (score | liblinear)' % fmt)


def main():
    if len(sys.argv) != 4:
        sys.exit('usage: peers_auc.py TEST_LIBSVM score|liblinear PREDICTIONS')
    y, p = labels(sys.argv[1]), scores(sys.argv[3], sys.argv[2])
    if len(y) != len(p):
        sys.exit('peers_auc: %s has %d predictions for %d test rows' % (sys.argv[3], len(p), len(y)))
    print('%.6f' % roc_auc_score(y, p))


main()
