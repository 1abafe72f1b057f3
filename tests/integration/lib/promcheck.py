#!/usr/bin/env python3
"""Checks Prometheus text exposition (format 0.0.4), what promtool's
`check metrics` and the Prometheus parser reject, plus fsgd's conventions.

  promcheck.py check FILE [--prefix P]   exit 0 and the samples as JSON on
                                         stdout, or exit 1 naming each problem
  promcheck.py compare OLD.json NEW.json [--strict SERIES...]
      every counter series (and histogram bucket, _sum, _count) of OLD is
      in NEW and did not go down; each --strict series went up
  promcheck.py selftest                  the checker rejects broken input

Rules checked: HELP and TYPE at most once per family and before its
samples, every family typed and with HELP; metric and label names; label
values quoted with only the escapes \\\\ \\" \\n; values Go floats (NaN, +Inf,
-Inf); a family's samples together; no series twice; counters end in _total
and are >= 0 and not NaN; histograms: le on every bucket, le increasing
and +Inf last, cumulative counts that never go down, _count equal to the
+Inf bucket, _sum present; every name starts with the prefix.
"""
import json
import math
import re
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
VALUE = re.compile(r"^(?:[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?Inf|NaN)$")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def parse_value(s):
    if not VALUE.match(s):
        raise ValueError("bad value '%s'" % s)
    return float(s.replace("Inf", "inf").replace("NaN", "nan"))


def parse_labels(s, pos):
    """s[pos] is '{'; returns (labels dict, position after '}')."""
    labels = {}
    i = pos + 1
    while True:
        if i < len(s) and s[i] == "}":
            return labels, i + 1
        m = LABEL.match(s, i)
        if not m:
            raise ValueError("bad label name at column %d" % (i + 1))
        name = m.group(0)
        if name.startswith("__"):
            raise ValueError("label name '%s' is reserved" % name)
        i = m.end()
        if s[i:i + 2] != '="':
            raise ValueError("label '%s': expected =\"" % name)
        i += 2
        val = []
        while True:
            if i >= len(s):
                raise ValueError("label '%s': unterminated value" % name)
            c = s[i]
            if c == "\\":
                e = s[i + 1:i + 2]
                if e not in ("\\", '"', "n"):
                    raise ValueError("label '%s': bad escape \\%s" % (name, e))
                val.append({"n": "\n"}.get(e, e))
                i += 2
            elif c == '"':
                i += 1
                break
            elif c == "\n":
                raise ValueError("label '%s': newline in value" % name)
            else:
                val.append(c)
                i += 1
        if name in labels:
            raise ValueError("label '%s' twice" % name)
        labels[name] = "".join(val)
        if i < len(s) and s[i] == ",":
            i += 1
        elif i < len(s) and s[i] == "}":
            continue
        else:
            raise ValueError("expected , or } after label '%s'" % name)


def series_key(name, labels):
    return name + "{" + ",".join('%s="%s"' % (k, labels[k]) for k in sorted(labels)) + "}"


def check(text, prefix="fsgd_"):
    """Returns (samples {series: value}, types {family: type}, errors)."""
    errors = []
    helps, types, samples = {}, {}, {}
    seen_families, current = [], None
    buckets = {}  # (family, labels-without-le) -> [(le, count)]
    sums, counts = {}, {}
    if text and not text.endswith("\n"):
        errors.append("the exposition does not end with a newline")
    for no, line in enumerate(text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"), 1):
        where = "line %d" % no
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                if not NAME.fullmatch(name):
                    errors.append("%s: bad metric name '%s'" % (where, name))
                    continue
                if parts[1] == "HELP":
                    if name in helps:
                        errors.append("%s: second HELP for %s" % (where, name))
                    text_ = parts[3] if len(parts) > 3 else ""
                    if re.search(r"\\[^\\n]", text_.replace("\\\\", "")):
                        errors.append("%s: HELP of %s has an escape other than \\\\ and \\n" % (where, name))
                    helps[name] = text_
                else:
                    t = parts[3] if len(parts) > 3 else ""
                    if t not in TYPES:
                        errors.append("%s: unknown type '%s' for %s" % (where, t, name))
                    if name in types:
                        errors.append("%s: second TYPE for %s" % (where, name))
                    if name in seen_families:
                        errors.append("%s: TYPE of %s after its samples" % (where, name))
                    types[name] = t
            continue
        m = NAME.match(line)
        if not m:
            errors.append("%s: not a sample: %r" % (where, line))
            continue
        name = m.group(0)
        i = m.end()
        labels = {}
        try:
            if i < len(line) and line[i] == "{":
                labels, i = parse_labels(line, i)
            if i >= len(line) or line[i] != " ":
                raise ValueError("expected a space before the value")
            rest = line[i + 1:].split(" ")
            if len(rest) not in (1, 2) or (len(rest) == 2 and not re.fullmatch(r"-?[0-9]+", rest[1])):
                raise ValueError("expected VALUE [TIMESTAMP]")
            value = parse_value(rest[0])
        except ValueError as e:
            errors.append("%s: %s: %s" % (where, name, e))
            continue
        family, suffix = name, ""
        for sfx in ("_bucket", "_sum", "_count"):
            base = name[: -len(sfx)]
            if name.endswith(sfx) and types.get(base) in ("histogram", "summary"):
                family, suffix = base, sfx
        if not family.startswith(prefix):
            errors.append("%s: %s does not start with %s" % (where, name, prefix))
        if family not in types:
            errors.append("%s: %s has no TYPE" % (where, name))
        if family not in helps:
            errors.append("%s: %s has no HELP" % (where, name))
        if family != current:
            if family in seen_families:
                errors.append("%s: samples of %s are not together" % (where, family))
            seen_families.append(family)
            current = family
        key = series_key(name, labels)
        if key in samples:
            errors.append("%s: series %s twice" % (where, key))
        samples[key] = value
        t = types.get(family)
        if t == "counter":
            if not family.endswith("_total"):
                errors.append("%s: counter %s does not end in _total" % (where, family))
            if math.isnan(value) or value < 0:
                errors.append("%s: counter %s is %s" % (where, key, rest[0]))
        elif t == "histogram":
            rest_labels = dict(labels)
            if suffix == "_bucket":
                if "le" not in labels:
                    errors.append("%s: bucket without le" % where)
                    continue
                le = rest_labels.pop("le")
                try:
                    lev = parse_value(le)
                except ValueError:
                    errors.append("%s: le=\"%s\" is not a number" % (where, le))
                    continue
                buckets.setdefault((family, series_key("", rest_labels)), []).append((lev, value))
            elif suffix == "_sum":
                sums[(family, series_key("", rest_labels))] = value
            elif suffix == "_count":
                counts[(family, series_key("", rest_labels))] = value
            else:
                errors.append("%s: %s: a histogram has only _bucket, _sum and _count samples" % (where, name))
    for (family, lab), bs in buckets.items():
        les = [b[0] for b in bs]
        if any(b >= a for a, b in zip(les[1:], les)) or not les or les[-1] != math.inf:
            errors.append("histogram %s%s: le not increasing or +Inf not last: %s" % (family, lab, les))
        cs = [b[1] for b in bs]
        if any(b < a for a, b in zip(cs, cs[1:])):
            errors.append("histogram %s%s: bucket counts go down: %s" % (family, lab, cs))
        if (family, lab) not in counts or counts[(family, lab)] != cs[-1]:
            errors.append("histogram %s%s: _count %s != +Inf bucket %s" % (family, lab, counts.get((family, lab)),
                                                                           cs[-1]))
        if (family, lab) not in sums:
            errors.append("histogram %s%s: no _sum" % (family, lab))
    for name, t in types.items():
        if t == "histogram" and not any(f == name for f, _ in buckets):
            errors.append("histogram %s has no buckets" % name)
    return samples, types, errors


def counter_like(key, types):
    """Series that may never go down: counters, histogram buckets/sum/count."""
    name = key.split("{", 1)[0]
    if types.get(name) == "counter":
        return True
    for sfx in ("_bucket", "_count", "_sum"):
        if name.endswith(sfx) and types.get(name[: -len(sfx)]) == "histogram":
            return True
    return False


def compare(old, new, strict):
    errors = []
    for key, v in old["samples"].items():
        if not counter_like(key, old["types"]):
            continue
        if key not in new["samples"]:
            errors.append("%s is gone" % key)
        elif new["samples"][key] < v:
            errors.append("%s went down: %s -> %s" % (key, v, new["samples"][key]))
    for key in strict:
        a, b = old["samples"].get(key), new["samples"].get(key)
        if a is None or b is None or not b > a:
            errors.append("%s did not go up: %s -> %s" % (key, a, b))
        else:
            print("%s: %g -> %g" % (key, a, b))
    return errors


BROKEN = [
    ("no TYPE", "# HELP fsgd_x_total x\nfsgd_x_total 1\n"),
    ("no HELP", "# TYPE fsgd_x_total counter\nfsgd_x_total 1\n"),
    ("bad name", "# HELP fsgd-x x\n# TYPE fsgd-x gauge\nfsgd-x 1\n"),
    ("bad value", "# HELP fsgd_x x\n# TYPE fsgd_x gauge\nfsgd_x one\n"),
    ("bad escape", '# HELP fsgd_x x\n# TYPE fsgd_x gauge\nfsgd_x{a="\\t"} 1\n'),
    ("unquoted label", "# HELP fsgd_x x\n# TYPE fsgd_x gauge\nfsgd_x{a=1} 1\n"),
    ("duplicate series", "# HELP fsgd_x x\n# TYPE fsgd_x gauge\nfsgd_x 1\nfsgd_x 2\n"),
    ("counter without _total", "# HELP fsgd_x x\n# TYPE fsgd_x counter\nfsgd_x 1\n"),
    ("negative counter", "# HELP fsgd_x_total x\n# TYPE fsgd_x_total counter\nfsgd_x_total -1\n"),
    ("TYPE after samples", "# HELP fsgd_x x\nfsgd_x 1\n# TYPE fsgd_x gauge\n"),
    ("split family", "# HELP fsgd_a a\n# TYPE fsgd_a gauge\n# HELP fsgd_b b\n# TYPE fsgd_b gauge\n"
                     'fsgd_a{k="1"} 1\nfsgd_b 1\nfsgd_a{k="2"} 1\n'),
    ("no newline at the end", "# HELP fsgd_x x\n# TYPE fsgd_x gauge\nfsgd_x 1"),
    ("wrong prefix", "# HELP other_x x\n# TYPE other_x gauge\nother_x 1\n"),
    ("buckets go down", "# HELP fsgd_h h\n# TYPE fsgd_h histogram\nfsgd_h_bucket{le=\"1\"} 5\n"
                        "fsgd_h_bucket{le=\"+Inf\"} 4\nfsgd_h_sum 1\nfsgd_h_count 4\n"),
    ("+Inf missing", "# HELP fsgd_h h\n# TYPE fsgd_h histogram\nfsgd_h_bucket{le=\"1\"} 5\nfsgd_h_sum 1\n"
                     "fsgd_h_count 5\n"),
    ("count differs", "# HELP fsgd_h h\n# TYPE fsgd_h histogram\nfsgd_h_bucket{le=\"1\"} 1\n"
                      "fsgd_h_bucket{le=\"+Inf\"} 2\nfsgd_h_sum 1\nfsgd_h_count 3\n"),
    ("le not increasing", "# HELP fsgd_h h\n# TYPE fsgd_h histogram\nfsgd_h_bucket{le=\"2\"} 1\n"
                          "fsgd_h_bucket{le=\"1\"} 1\nfsgd_h_bucket{le=\"+Inf\"} 1\nfsgd_h_sum 1\nfsgd_h_count 1\n"),
]
GOOD = ('# HELP fsgd_x_total x \\\\ y\\n\n# TYPE fsgd_x_total counter\nfsgd_x_total{a="q\\"\\\\\\n",b="2"} 3\n'
        "# HELP fsgd_g g\n# TYPE fsgd_g gauge\nfsgd_g NaN\n# HELP fsgd_h h\n# TYPE fsgd_h histogram\n"
        'fsgd_h_bucket{le="0.5"} 1\nfsgd_h_bucket{le="+Inf"} 2\nfsgd_h_sum 7.5e-1\nfsgd_h_count 2\n')


def main(argv):
    if len(argv) >= 2 and argv[1] == "check":
        prefix = argv[argv.index("--prefix") + 1] if "--prefix" in argv else "fsgd_"
        samples, types, errors = check(open(argv[2], encoding="utf-8").read(), prefix)
        for e in errors:
            print("%s: %s" % (argv[2], e), file=sys.stderr)
        if not samples:
            print("%s: no samples" % argv[2], file=sys.stderr)
            return 1
        json.dump({"samples": samples, "types": types}, sys.stdout, sort_keys=True)
        return 1 if errors else 0
    if len(argv) >= 4 and argv[1] == "compare":
        old, new = (json.load(open(p)) for p in argv[2:4])
        strict = argv[argv.index("--strict") + 1:] if "--strict" in argv else []
        errors = compare(old, new, strict)
        for e in errors:
            print(e, file=sys.stderr)
        return 1 if errors else 0
    if len(argv) == 2 and argv[1] == "selftest":
        bad = 0
        samples, _, errors = check(GOOD)
        if errors or samples.get('fsgd_x_total{a="q"\\\n",b="2"}') != 3:
            print("selftest: a valid exposition was refused: %s %s" % (errors, samples), file=sys.stderr)
            bad += 1
        for why, text in BROKEN:
            if not check(text)[2]:
                print("selftest: accepted broken input (%s)" % why, file=sys.stderr)
                bad += 1
        old = {"samples": {"fsgd_x_total{}": 5}, "types": {"fsgd_x_total": "counter"}}
        if not compare(old, {"samples": {"fsgd_x_total{}": 4}, "types": old["types"]}, []) or \
                not compare(old, {"samples": {}, "types": {}}, []) or \
                not compare(old, old, ["fsgd_x_total{}"]):
            print("selftest: compare missed a counter going down, gone or standing still", file=sys.stderr)
            bad += 1
        print("promcheck selftest: %d broken inputs refused, %d problems" % (len(BROKEN), bad))
        return 1 if bad else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
