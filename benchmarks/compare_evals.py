"""Checkpoints side by side on the same held-out programs: `drtriton-train eval` folders in, a
table out (pass@1 with its 95% interval on the programs every folder answered, and each
checkpoint against the first: programs it newly solves and newly fails, with the exact two-sided
sign test's p-value on those discordant pairs).

    python benchmarks/compare_evals.py RUN/eval_sft RUN/eval_drpo_s0 ... [--group "synthetic k=1"]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from drtriton.training.metrics import wilson


def answers(folder: Path, group: str) -> dict[str, bool]:
    path = folder / group.replace(" ", "_").replace("=", "") / "answers.jsonl"
    return {row["problem"]: bool(row["correct"]) for row in map(json.loads, path.read_text().splitlines())}


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact binomial p-value of wins vs losses under p = 1/2."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def compare(folders: list[Path], group: str) -> str:
    results = {f: answers(f, group) for f in folders}
    common = sorted(set.intersection(*(set(r) for r in results.values())))
    base = results[folders[0]]
    lines = [f"{group}: {len(common)} programs answered by every checkpoint", "",
             "| checkpoint | pass@1 | 95% interval | vs first: solved / lost | sign test p |", "|---|---|---|---|---|"]
    for folder, result in results.items():
        hits = sum(result[p] for p in common)
        low, high = wilson(hits, len(common))
        wins = sum(result[p] and not base[p] for p in common)
        losses = sum(base[p] and not result[p] for p in common)
        versus = "-" if folder == folders[0] else f"+{wins} / -{losses}"
        p = "-" if folder == folders[0] else f"{sign_test(wins, losses):.3f}"
        lines.append(f"| {folder.name} | {hits / max(len(common), 1):.1%} ({hits}) | {low:.1%}-{high:.1%} | {versus} | {p} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="eval output folders; the first is the baseline")
    parser.add_argument("--group", default="synthetic k=1")
    args = parser.parse_args()
    print(compare(args.folders, args.group))


if __name__ == "__main__":
    main()
