#!/usr/bin/env python3
# benchmark/tick_limit_sim.py: the wait a commit spends behind the ticker's
# rate limit (src/ticker.c ticker_next_pass: a cell-rate limit, one pass per
# tick_interval on average, bursts of TICK_BURST), simulated for a Poisson
# stream of commits, each waking the ticker; a pass ticks every commit made
# before it starts and lasts PASS ms.  No server: what the rule alone gives
# (issue #30 item 5, the latency tail).
#
#   python3 benchmark/tick_limit_sim.py [RATE=100] [PASS_MS=1]
import random
import sys


def sim(rate, interval, burst, pass_s, n=200000, seed=1):
    random.seed(seed)
    tau = (burst - 1) * interval
    t = 0.0
    arrivals = []
    for _ in range(n):
        t += random.expovariate(rate)
        arrivals.append(t)
    waits = []
    tat = 0.0
    busy_until = -1.0
    i = 0
    while i < n:
        start = max(arrivals[i], tat - tau, busy_until)
        j = i
        while j < n and arrivals[j] <= start:
            waits.append(start - arrivals[j] + pass_s)
            j += 1
        tat = max(tat, start) + interval
        busy_until = start + pass_s
        i = j
    waits.sort()
    return waits[len(waits) // 2] * 1000, waits[int(len(waits) * 0.99)] * 1000


rate = float(sys.argv[1]) if len(sys.argv) > 1 else 100.0
pass_ms = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
print(f"{rate:.0f} commits/s, a pass lasts {pass_ms} ms: wait from commit to tick")
print(f"{'tick_interval':>14} {'burst':>6} {'p50 ms':>8} {'p99 ms':>8}")
for interval_ms, burst in [(10, 1), (10, 3), (10, 20), (8, 3), (6, 3), (5, 3)]:
    p50, p99 = sim(rate, interval_ms / 1000, burst, pass_ms / 1000)
    print(f"{interval_ms:>14} {burst:>6} {p50:>8.2f} {p99:>8.2f}")
