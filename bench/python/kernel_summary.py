#!/usr/bin/env python3
"""Summarises `ncu --csv --metrics gpu__time_duration.sum` output: kernels grouped by
name with count and total time, largest first (bench/engine-kernels.ts writes the input).

Run: python3 bench/python/kernel_summary.py kernels.csv [top]
"""
import csv
import sys
from collections import defaultdict


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]  # ncu's own log lines are not CSV
    rows = list(csv.DictReader(lines))
    totals = defaultdict(lambda: [0, 0.0])
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "ns": 1e-3, "us": 1.0, "ms": 1e3}.get(r.get("Metric Unit", "nsecond"), 1e-3)
        us = float(r["Metric Value"].replace(",", "")) * scale
        name = r["Kernel Name"][:90]
        totals[name][0] += 1
        totals[name][1] += us
    count = sum(c for c, _ in totals.values())
    total = sum(t for _, t in totals.values())
    print(f"{count} kernels, {total / 1000:.3f} ms of kernel time")
    print(f"{'count':>6} {'total us':>10} {'mean us':>8}  kernel")
    for name, (c, t) in sorted(totals.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"{c:>6} {t:>10.1f} {t / c:>8.2f}  {name}")


if __name__ == "__main__":
    main()
