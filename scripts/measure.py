#!/usr/bin/env python3
"""One process measured, with the processes it starts (a Python script's JVM): wall
time, user and system CPU, peak resident memory (`VmHWM` of the process itself), peak
anonymous memory (`RssAnon` summed over the process tree, sampled from /proc every 2 ms:
the kernel keeps no peak of it) and minor page faults.

    scripts/measure.py -- COMMAND [ARG ...]      # prints one JSON line
    from measure import run; run(["bronze", "ingest", ...])   # the same as a dict

Anonymous memory is what a run allocates; file-backed pages (a landing file mapped from
the page cache) are in `VmHWM` but not in `RssAnon`, and are the page cache's to keep or
drop. System CPU on this kind of VM is mostly the first touch of fresh pages.
"""
import json
import os
import subprocess
import sys
import threading
import time


TICKS = os.sysconf("SC_CLK_TCK")


def _tree(pid):
    """`pid` and its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            pass
    return out


def _rss_anon_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, ValueError):
        return None
    return None


def _cpu_s(pid):
    """User and system seconds of `pid` so far."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) / TICKS, int(fields[12]) / TICKS
    except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
        return None


def run(cmd, ok=(0,), **popen):
    """Runs `cmd` to its end; its measures as a dict (and its exit code)."""
    popen.setdefault("stdout", subprocess.DEVNULL)
    popen.setdefault("stderr", subprocess.DEVNULL)
    started = time.perf_counter()
    p = subprocess.Popen(cmd, **popen)
    peak = [0]
    cpu = {}  # pid -> the last (user, system) seen
    done = threading.Event()

    def sample():
        while not done.is_set():
            pids = _tree(p.pid)
            kb = sum(_rss_anon_kb(q) or 0 for q in pids)
            peak[0] = max(peak[0], kb)
            for q in pids:
                if (c := _cpu_s(q)) is not None:
                    cpu[q] = c
            done.wait(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - started
    done.set()
    sampler.join()
    code = os.waitstatus_to_exitcode(status)
    # wait4 counts the process and the descendants it reaped; the samples also those it
    # did not (a JVM left to exit on its own); the larger of the two.
    user = max(usage.ru_utime, sum(c[0] for c in cpu.values()))
    system = max(usage.ru_stime, sum(c[1] for c in cpu.values()))
    if code not in ok:
        raise RuntimeError(f"{' '.join(map(str, cmd))}: exit {code}")
    return {
        "exit": code,
        "wall_s": round(wall, 4),
        "user_s": round(user, 4),
        "sys_s": round(system, 4),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "peak_rss_anon_mb": round(peak[0] / 1024, 1),
        "minor_faults": usage.ru_minflt,
    }


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        sys.exit(__doc__)
    print(json.dumps(run(args, ok=range(256))))
