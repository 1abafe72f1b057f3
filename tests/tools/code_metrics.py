#!/usr/bin/env python3
"""How big fsgd's surface and its largest pieces are (issue 41).

Prints one "name value" line per count, then the names behind the counts
that should shrink. With --check FILE, exits 1 when a count held there grew
(each line of FILE: "name max"); --write FILE writes the current counts as
that file. tests/integration/code_metrics.sh holds the tree to
tests/tools/code_metrics.baseline this way.

The parser is a light one, enough for this code base's style: comments and
literals are blanked, a function definition is a top-level "name(...) {",
a public function is a top-level prototype in M/include/fsgd/*.h (a static
inline definition there counts too). A use is any occurrence of the name
outside its definitions and its public declaration; files under tests/ are
test uses, the Python package's are not (it binds the shared library).

  public_headers           headers in */include/fsgd/
  public_functions         functions those headers declare
  public_used_only_by_tests  no use outside tests/ (nor the Python package)
  public_unused            no use at all, tests included
  public_used_only_in_module used outside tests only in their own module
  functions_over_100_lines / _over_200_lines   definitions in the library and CLI
  params_over_8_public / params_over_10_public  public prototypes
  params_over_8_all / params_over_10_all        every definition (library, CLI)
  monotonic_clock_helpers  short functions of no parameters that read
                           CLOCK_MONOTONIC (common/clock.c excepted)
  lines_<file>             lines of train.c, worker.c, cmd_run.c
"""
import os
import re
import sys

LIB_DIRS = ("common", "codec", "data", "strategy", "trainer")
WATCHED_FILES = ("trainer/core/train.c", "trainer/distributed/worker.c", "trainer/cli/cmd_run.c")
# Functions over 100 lines kept on purpose (still counted), with why: the
# issue allows the codecs' hot loops to stay whole, as zstd's block
# compressors are; the text parsers' per-byte loops are the same kind.
KEPT_LONG = {
    ("codec/fastsgd.c", "fs_encode"): "codec hot loop: the encoder over every entry of a message",
    ("codec/fastsgd.c", "fs_decode"): "codec hot loop: the decoder over every entry of a message",
    ("codec/sketchml.c", "sketchml_encode"): "codec hot loop: the encoder over every entry of a message",
    ("codec/sketchml.c", "sketchml_decode"): "codec hot loop: the decoder over every entry of a message",
    ("codec/efsign.c", "efsign_encode"): "codec hot loop: the encoder over every entry of a message",
    ("codec/efsign.c", "efsign_decode"): "codec hot loop: the decoder over every entry of a message",
    ("data/libsvm.c", "parse_line"): "parser hot loop: every byte of a LIBSVM row",
    ("data/vw.c", "parse_line"): "parser hot loop: every byte of a VW row",
}
IDENT = re.compile(r"[A-Za-z_]\w*")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do", "else", "defined"}


def strip_c(text, keep_preprocessor):
    """Blanks comments and string/char literals (and, unless
    keep_preprocessor, preprocessor lines), keeping every newline so line
    numbers hold."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if c == "\n":
            out.append(c)
            i += 1
            at_line_start = True
            continue
        if at_line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if at_line_start and c == "#" and not keep_preprocessor:
            while i < n:  # the directive and its continuation lines
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("\n")
                    i += 2
                    continue
                if text[i] == "\n":
                    break
                i += 1
            continue
        at_line_start = False
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def split_params(params):
    """The parameters of a parameter list (its text between the parens)."""
    parts, depth, cur = [], 0, []
    for c in params:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    parts = [p.strip() for p in parts]
    if parts == [""] or parts == ["void"]:
        return []
    return parts


def name_before_paren(head):
    """For "static int foo(int a, char *b)" (head ends at ')'), returns
    (name, parameter text) or None when head is no function."""
    head = re.sub(r"__attribute__\s*\(\(.*?\)\)", " ", head, flags=re.S).rstrip()
    if not head.endswith(")"):
        return None
    depth, j = 0, len(head) - 1
    while j >= 0:
        if head[j] == ")":
            depth += 1
        elif head[j] == "(":
            depth -= 1
            if depth == 0:
                break
        j -= 1
    if j < 0:
        return None
    before = head[:j].rstrip()
    m = re.search(r"([A-Za-z_]\w*)$", before)
    if not m or m.group(1) in KEYWORDS:
        return None
    rest = before[:m.start()].strip()
    if not rest or rest.endswith(("=", ",", "(")) or rest.startswith("typedef"):
        return None  # a call, an initializer, a typedef
    return m.group(1), head[j + 1:-1]


def top_level(text):
    """Yields (kind, head, start_offset, end_offset) for each top-level
    statement: kind "def" for "head { ... }", "decl" for "head;"."""
    depth, start, i, n = 0, 0, 0, len(text)
    body_start = None
    while i < n:
        c = text[i]
        if c == "{":
            if depth == 0:
                body_start = i
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                head = text[start:body_start]
                # "struct x { ... } v;" / "= { ... };": the statement goes on to ';'
                if name_before_paren(head) is not None:
                    yield "def", head, start, i + 1
                    start = i + 1
        elif c == ";" and depth == 0:
            yield "decl", text[start:i], start, i + 1
            start = i + 1
        i += 1


class Source:
    def __init__(self, path):
        self.path = path
        with open(path, encoding="utf-8", errors="replace") as f:
            self.raw = f.read()
        if path.endswith(".py"):
            self.code = self.raw
        else:
            self.code = strip_c(self.raw, keep_preprocessor=True)
        self.words = {}
        for w in IDENT.findall(self.code):
            self.words[w] = self.words.get(w, 0) + 1


def module_of(path):
    parts = path.split("/")
    if parts[0] == "trainer":
        return "trainer/" + parts[1]
    return parts[0]


def walk(top, exts):
    found = []
    for d, dirs, files in os.walk(top):
        dirs[:] = sorted(x for x in dirs if x not in ("build", "__pycache__", ".deps"))
        for f in sorted(files):
            if f.endswith(exts):
                found.append(os.path.join(d, f))
    return found


def measure(root):
    os.chdir(root)
    lib = [p for d in LIB_DIRS for p in walk(d, (".c", ".h", ".cu"))]
    tests = walk("tests", (".c", ".h"))
    python = walk("python", (".py",))
    sources = {p: Source(p) for p in lib + tests + python}

    # Every definition in the library and the CLI (not .cu: C++).
    defs = []  # (path, name, first line, lines, params, body)
    for p in lib:
        if not p.endswith(".c"):
            continue
        code = strip_c(sources[p].raw, keep_preprocessor=False)
        for kind, head, s, e in top_level(code):
            if kind != "def":
                continue
            name, params = name_before_paren(head)
            name_at = s + head.rfind(name + params) if (name + params) in head else s + len(head)
            first = code.count("\n", 0, name_at) + 1
            last = code.count("\n", 0, e) + 1
            body = code[s + len(head):e]
            defs.append((p, name, first, last - first + 1, len(split_params(params)), body))
    defined_in = {}
    for p, name, *_ in defs:
        defined_in.setdefault(name, []).append(p)

    # Public functions: prototypes (and inline definitions) in public headers.
    headers = [p for p in lib if "/include/fsgd/" in p and p.endswith(".h")]
    public = {}  # name -> (header, params)
    for h in headers:
        code = strip_c(sources[h].raw, keep_preprocessor=False)
        for kind, head, s, e in top_level(code):
            head = head.strip()
            if kind == "decl" and head.startswith(("typedef", "extern")) and "(" not in head.split("=")[0]:
                continue
            got = name_before_paren(head)
            if got and not head.startswith("typedef"):
                public.setdefault(got[0], (h, len(split_params(got[1]))))

    only_tests, unused, only_module = [], [], []
    for name, (h, _) in sorted(public.items()):
        mod = module_of(h)
        outside = inside = in_tests = 0
        for p, src in sources.items():
            k = src.words.get(name, 0)
            if p == h:
                k -= 1  # its declaration
            k -= defined_in.get(name, []).count(p)
            if k <= 0:
                continue
            if p.startswith("tests/"):
                in_tests += k
            elif module_of(p) == mod:
                inside += k
            else:
                outside += k
        if outside == 0 and inside == 0:
            (only_tests if in_tests else unused).append(name)
        elif outside == 0:
            only_module.append(name)

    long100 = sorted((n for n in defs if n[3] > 100), key=lambda d: -d[3])
    long200 = [d for d in long100 if d[3] > 200]
    clocks = [d for d in defs if "CLOCK_MONOTONIC" in d[5] and d[3] <= 10 and d[4] == 0
              and d[0] != "common/clock.c"]

    counts = [
        ("public_headers", len(headers)),
        ("public_functions", len(public)),
        ("public_used_only_by_tests", len(only_tests)),
        ("public_unused", len(unused)),
        ("public_used_only_in_module", len(only_module)),
        ("functions_over_100_lines", len(long100)),
        ("functions_over_200_lines", len(long200)),
        ("params_over_8_public", sum(1 for _, k in public.values() if k > 8)),
        ("params_over_10_public", sum(1 for _, k in public.values() if k > 10)),
        ("params_over_8_all", sum(1 for d in defs if d[4] > 8)),
        ("params_over_10_all", sum(1 for d in defs if d[4] > 10)),
        ("monotonic_clock_helpers", len(clocks)),
    ]
    for f in WATCHED_FILES:
        lines = sources[f].raw.count("\n") if f in sources else 0
        counts.append(("lines_" + os.path.basename(f).replace(".", "_"), lines))
    details = [
        ("functions over 100 lines",
         ["%s %s:%d %d lines%s" % (d[1], d[0], d[2], d[3],
                                   " (kept: %s)" % KEPT_LONG[(d[0], d[1])] if (d[0], d[1]) in KEPT_LONG else "")
          for d in long100]),
        ("public functions with more than 8 parameters",
         ["%s %s %d" % (n, h, k) for n, (h, k) in sorted(public.items()) if k > 8]),
        ("functions with more than 10 parameters",
         ["%s %s:%d %d" % (d[1], d[0], d[2], d[4]) for d in defs if d[4] > 10]),
        ("public functions used only by tests", ["%s %s" % (n, public[n][0]) for n in only_tests]),
        ("public functions used by nothing", ["%s %s" % (n, public[n][0]) for n in unused]),
        ("public functions used only in their module", ["%s %s" % (n, public[n][0]) for n in only_module]),
        ("monotonic-clock helpers", ["%s %s:%d" % (d[1], d[0], d[2]) for d in clocks]),
    ]
    return counts, details


def main(argv):
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    check = write = None
    quiet = False
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--check" and args:
            check = os.path.abspath(args.pop(0))
        elif a == "--write" and args:
            write = os.path.abspath(args.pop(0))
        elif a == "--counts":
            quiet = True
        else:
            sys.stderr.write("usage: code_metrics.py [--counts] [--check BASELINE | --write BASELINE]\n")
            return 2
    counts, details = measure(root)
    for k, v in counts:
        print("%s %d" % (k, v))
    if not quiet:
        for title, rows in details:
            print("\n# %s (%d)" % (title, len(rows)))
            for r in rows:
                print("  " + r)
    if write:
        with open(write, "w") as f:
            f.write("# The most each count of tests/tools/code_metrics.py may be; lower them as\n"
                    "# the code improves (public_functions is shown, not held).\n")
            for k, v in counts:
                if k != "public_functions":
                    f.write("%s %d\n" % (k, v))
    if check:
        held = {}
        with open(check) as f:
            for lineno, line in enumerate(f, 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                parts = line.split()
                if len(parts) != 2 or not parts[1].isdigit():
                    sys.stderr.write("%s:%d: expected \"name count\"\n" % (check, lineno))
                    return 2
                held[parts[0]] = int(parts[1])
        now = dict(counts)
        worse = [(k, held[k], now[k]) for k in held if k in now and now[k] > held[k]]
        unknown = [k for k in held if k not in now]
        for k in unknown:
            sys.stderr.write("%s: unknown count %s\n" % (check, k))
        for k, was, is_ in worse:
            sys.stderr.write("code_metrics: %s grew from %d to %d (baseline %s)\n" % (k, was, is_, check))
        if worse or unknown:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
