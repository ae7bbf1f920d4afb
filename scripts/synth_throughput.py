"""Measure synthesis throughput (programs per second per core) at k = 1..5.

    python scripts/synth_throughput.py [-n 200] [--ks 1-5] [--seed 0] [--workers 1]

Each k runs ``generate`` in this process (``--workers 1``) and reports wall-clock and CPU-time
rates; CPU time (this process and its children) is what "per core" means on a shared machine.
Default bounds are used, including the execution check of every candidate. Prints a Markdown
table for docs/synthesis.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time
import warnings
from datetime import date


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv=None) -> int:
    from drtriton.training.cli import parse_ops
    from drtriton.training.synth.config import Bounds
    from drtriton.training.synth.generate import generate

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=200, help="programs per k")
    parser.add_argument("--ks", type=parse_ops, default=parse_ops("1-5"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # PyTorch warnings from running candidates
    bounds = Bounds.make()
    generate(5, [1], args.seed + 999, bounds)  # warm-up: imports (torch, OR-Tools) not counted
    print(f"Measured {date.today().isoformat()} on {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}; bounds {bounds}; "
          f"`python scripts/synth_throughput.py -n {args.n} --workers {args.workers}`\n")
    print("| k | programs | wall s | CPU s | programs/s (wall) | programs/s/core (CPU) | candidates "
          "| abandoned sequences |")
    print("|---|---|---|---|---|---|---|---|")
    for k in args.ks:
        wall, cpu = time.perf_counter(), cpu_seconds()
        result = generate(args.n, [k], args.seed, bounds, workers=args.workers)
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
        n = len(result.programs)
        print(f"| {k} | {n} | {wall:.1f} | {cpu:.1f} | {n / wall:.1f} | {n / cpu:.1f} | "
              f"{result.stats['candidates']} | {result.stats['abandoned_sequences']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
