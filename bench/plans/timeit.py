#!/usr/bin/env python3
"""Times whole processes: RUNS rounds, each running every command once in
turn (so a moment when the machine is busy costs every command alike),
and prints each command's median wall time in microseconds, one a line.
Exit codes 0 and 1 (findings) are both a success; anything else stops.

usage: timeit.py RUNS COMMAND [COMMAND...]   (a command is one string,
split on spaces)
"""
import statistics
import subprocess
import sys
import time


def main():
    runs = int(sys.argv[1])
    cmds = [c.split() for c in sys.argv[2:]]
    times = [[] for _ in cmds]
    for _ in range(runs):
        for i, cmd in enumerate(cmds):
            start = time.perf_counter()
            rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
            times[i].append(time.perf_counter() - start)
            if rc not in (0, 1):
                sys.exit("timeit: %s exited %d" % (" ".join(cmd), rc))
    for t in times:
        print(round(statistics.median(t) * 1e6))


main()
