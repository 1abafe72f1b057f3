# Writes test_vw.c's golden table: VW's own --audit indices for golden.vw
# (the text of test_vw.c's golden_vw) under each spec, a row's entries with
# one index summed. Run with the project's venv (VW 9.11):
#   build/venv/bin/python tests/unit/vw_golden_gen.py golden.vw
import subprocess, sys
PY = sys.executable
def run(args, path):
    out = subprocess.run([PY, "-m", "vowpalwabbit", "--audit", "--quiet", "-d", path, "--noconstant"] + args.split(),
                         capture_output=True, text=True).stdout
    rows = []
    for l in out.split("\n"):
        if l.startswith('\t'):
            d = {}
            for f in l.strip().split('\t'):
                parts = f.rsplit(':', 3)
                idx = int(parts[1]); val = float(parts[2])
                d[idx] = d.get(idx, 0) + val
            rows.append(sorted(d.items()))
    return rows
cfgs = [("vw:bits=18", "-b 18"), ("vw:bits=24:seed=7", "-b 24 --hash_seed 7"),
        ("vw:bits=18:interactions=ab,abc", "-b 18 -q ab --cubic abc"), ("vw:bits=20:interactions=::", "-b 20 -q ::")]
print("static const golden_t golden[] = {")
for spec, args in cfgs:
    rows = run(args, sys.argv[1])
    assert len(rows) == 6, len(rows)
    for r, row in enumerate(rows):
        print('    {"%s", %d, %d, {%s}},' % (spec, r, len(row), ", ".join("{%d, %rf}" % (i, v) for i, v in row)))
print("};")
