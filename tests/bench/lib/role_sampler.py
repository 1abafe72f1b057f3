"""Samples each role of a running `fsgd run` from /proc until it ends: its
CPU seconds (utime + stime, every thread) and its peak memory (VmHWM).

    role_sampler.py RUN_PID OUT [--every SECONDS]

RUN_PID: the `fsgd run` process; its children are its roles, named from
their command lines: shardI (an aggregator, --shard I/S; shard0 unsharded)
and workerI (--id I). OUT is rewritten every second and at the end (a run killed
midway still leaves what was seen up to a second before), as JSON:
  {"peak_kb": {ROLE: kB}, "cpu": {ROLE: s},
   "samples": [[CLOCK_MONOTONIC s, {ROLE: cpu s}], ...]}
CLOCK_MONOTONIC is the machine's one clock, the one fsgd's metrics give
step 1 on (step1_clock_seconds), so a sample lines up with the run's trace.
One process reading /proc: a shell loop's forks would take CPU from the
roles it measures.
"""
import json
import os
import re
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")


def role_of(cmdline):
    """shardI, workerI, or None for a process that is neither"""
    args = cmdline.split("\0")
    if "aggregator" in args:
        if "--shard" in args and args.index("--shard") + 1 < len(args):
            return "shard" + args[args.index("--shard") + 1].split("/")[0]
        return "shard0"
    if "worker" in args:
        if "--id" in args and args.index("--id") + 1 < len(args):
            return "worker" + args[args.index("--id") + 1]
        return "worker"
    return None


def children(ppid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        # the fields after the command name, which may hold spaces or parens
        rest = st[st.rindex(")") + 2:].split()
        if int(rest[1]) == ppid:
            out.append((int(d), rest))
    return out


def sample(ppid, peak, cpu):
    now = {}
    for pid, rest in children(ppid):
        try:
            with open("/proc/%d/cmdline" % pid) as f:
                role = role_of(f.read())
            if role is None:
                continue
            with open("/proc/%d/status" % pid) as f:
                m = re.search(r"^VmHWM:\s*(\d+) kB", f.read(), re.M)
        except OSError:
            continue
        now[role] = (int(rest[11]) + int(rest[12])) / HZ  # utime, stime
        cpu[role] = now[role]
        if m:
            peak[role] = max(peak.get(role, 0), int(m.group(1)))
    return now


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    run, out = int(argv[1]), argv[2]
    every = float(argv[argv.index("--every") + 1]) if "--every" in argv else 0.1
    peak, cpu, samples = {}, {}, []

    def write():
        with open(out + ".new", "w") as f:
            json.dump({"peak_kb": peak, "cpu": cpu, "samples": samples}, f)
        os.replace(out + ".new", out)

    written = 0.0
    while os.path.exists("/proc/%d" % run):
        now = sample(run, peak, cpu)
        t = time.clock_gettime(time.CLOCK_MONOTONIC)
        if now:
            samples.append([t, now])
        if t - written >= 1.0:
            write()
            written = t
        time.sleep(every)
    write()


if __name__ == "__main__":
    main(sys.argv)
