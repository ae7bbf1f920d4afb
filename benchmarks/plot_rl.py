"""DRPO against GRPO in one picture: held-out pass@1 (the curriculum's checks) and the rollouts'
correct rate and speed reward over steps, one colour per run (docs/benchmarks.md, "Training").

    python benchmarks/plot_rl.py RUN/drpo_s0 RUN/grpo_s0 ... --out rl.svg [--window 10]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from drtriton.training.metrics import moving_mean, plot, read

KEYS = ["heldout_pass1", "rewards/correctness/mean", "rewards/speed/mean"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="RL output folders (each with metrics.jsonl)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--window", type=int, default=10, help="steps in the moving mean of the per-step rewards")
    args = ap.parse_args()
    runs = {}
    for folder in args.runs:
        records = read(folder / "metrics.jsonl")
        for key in KEYS[1:]:
            records = moving_mean(records, key, args.window)
        runs[folder.name] = records
    plot(runs, KEYS, args.out, f"held-out pass@1; rewards (mean of {args.window} steps)")
    print(args.out)


if __name__ == "__main__":
    main()
