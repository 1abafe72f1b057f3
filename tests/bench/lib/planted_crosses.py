"""A fielded CTR set whose labels depend on planted pairwise crosses, as VW
text, for tests/bench/vw_compare.sh: 8 categorical fields (namespaces a..h,
VOCAB values each, Zipf-popular); the margin is a per-value weight of every
field plus a per-value-pair weight of the crosses (a,b) and (c,d), so a
linear model cannot fit those terms and a crossed one (-q ab -q cd) can.

usage: planted_crosses.py ROWS SEED OUT.vw"""
import sys

import numpy as np

rows, seed, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(seed)
FIELDS, VOCAB = "abcdefgh", 40
p = 1.0 / np.arange(1, VOCAB + 1) ** 0.8
p /= p.sum()
x = rng.choice(VOCAB, size=(rows, len(FIELDS)), p=p)
w = rng.normal(0, 0.4, size=(len(FIELDS), VOCAB))
wab = rng.normal(0, 1.2, size=(VOCAB, VOCAB))
wcd = rng.normal(0, 1.2, size=(VOCAB, VOCAB))
m = -0.8 + w[np.arange(len(FIELDS)), x].sum(axis=1) + wab[x[:, 0], x[:, 1]] + wcd[x[:, 2], x[:, 3]]
y = rng.random(rows) < 1 / (1 + np.exp(-m))
with open(out, "w") as f:
    for r in range(rows):
        f.write(("1" if y[r] else "-1") + "".join(" |%s %s%d" % (c, c, x[r, i]) for i, c in enumerate(FIELDS)) + "\n")
