#!/usr/bin/env python3
# benchmark/tick_limit_sim.py: the wait a commit spends behind the ticker's
# rate limit (src/ticker.c, ADR 0087), simulated for a Poisson stream of
# commits, each waking the ticker; a pass ticks every commit made before it
# starts and lasts PASS ms.  No server: what the rule alone gives (issue #30
# item 5, the latency tail), and what it costs: passes (a pass writes one
# tick row per queue it finds changed) per second and per commit.
#
# Rules:
#   limit  a cell-rate limit, one pass per tick_interval on average, bursts
#          of 3 (0.2.0 and ADR 0031's amendment)
#   floor  the same limit, but a commit that finds the ticker idle (no pass
#          for tick_interval / 5, no commit waiting) is ticked at once and
#          not charged (ADR 0087, built)
#
#   python3 benchmark/tick_limit_sim.py [RATE=100 ...] [--pass-ms=1]
import os
import random
import sys


def arrivals(rate, n, clump=1, seed=1):
    random.seed(seed)
    t = 0.0
    out = []
    while len(out) < n:
        t += random.expovariate(rate / clump)
        for k in range(clump):
            out.append(t + k * 0.0002)
    return out


def sim(arr, interval, burst, pass_s, floor=None):
    """floor None: the limit only; else the idle floor in seconds."""
    tau = (burst - 1) * interval
    waits = []
    tat = 0.0
    idle_tat = 0.0
    last_end = -1.0
    passes = 0
    i = 0
    n = len(arr)
    while i < n:
        first = arr[i]
        if floor is not None and first >= last_end + floor and first >= idle_tat - tau:
            start = first					# idle: at once, on its own limit
            idle_tat = max(idle_tat, start) + interval
        else:
            start = max(first, tat - tau, last_end)
            tat = max(tat, start) + interval
        j = i
        while j < n and arr[j] <= start:
            waits.append(start - arr[j] + pass_s)
            j += 1
        last_end = start + pass_s
        passes += 1
        i = j
    waits.sort()
    return (waits[len(waits) // 2] * 1000, waits[int(len(waits) * 0.99)] * 1000,
            passes / arr[-1])


rates = [float(a) for a in sys.argv[1:] if not a.startswith('--')] or [100.0]
pass_ms = 1.0
for a in sys.argv[1:]:
    if a.startswith('--pass-ms='):
        pass_ms = float(a.split('=', 1)[1])
print(f"a pass lasts {pass_ms} ms; wait from commit to tick, passes per second and per commit")
print(f"{'commits/s':>10} {'rule':>6} {'interval':>9} {'p50 ms':>8} {'p99 ms':>8} {'passes/s':>9} {'per commit':>11}")
for rate in rates:
    arr = arrivals(rate, max(200000, int(rate * 40)), int(os.environ.get('CLUMP', '1')))
    for rule, interval_ms in [('limit', 10), ('limit', 5), ('floor', 10)]:
        iv = interval_ms / 1000
        p50, p99, pps = sim(arr, iv, 3, pass_ms / 1000,
                            iv / 5 if rule == 'floor' else None)
        print(f"{rate:>10.0f} {rule:>6} {interval_ms:>7}ms {p50:>8.2f} {p99:>8.2f} {pps:>9.1f} {pps / rate:>11.3f}")
