"""Merge the outputs of several `drtriton bench --out DIR` runs (a benchmark split into chunks
that each fit one GPU call, or shards that shared `--claims`) into one report.

    python benchmarks/merge_bench.py --out docs/results/kb-level2-mixed --title "..." DIR1 DIR2 ...
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drtriton.bench import Claims, merge_runs, summarize, write_report  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--title", default="drtriton bench (merged)")
    ap.add_argument("--claims", type=Path, help="the shards' claims folder: problems claimed without a verdict "
                    "(a job that stopped) are counted as missing")
    ap.add_argument("dirs", nargs="+", type=Path)
    args = ap.parse_args()
    try:
        entries = merge_runs(args.dirs)
    except FileNotFoundError as e:
        sys.exit(f"merge_bench: {e}")
    if args.claims:
        unfinished = Claims(args.claims).unfinished(entries)
        for e in unfinished:
            print(f"missing: {e.problem.name}: {e.reason}", file=sys.stderr)
        entries += unfinished
    entries.sort(key=lambda e: (e.problem.origin, int(e.problem.name.split("_")[0]) if e.problem.name[0].isdigit() else 0))
    summary = summarize(entries)
    write_report(entries, summary, args.out, args.title)
    print(json.dumps({k: v for k, v in summary.items() if k != "statuses"}, indent=1))


if __name__ == "__main__":
    main()
