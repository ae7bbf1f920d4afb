"""Verifier latency, throughput and timing spread on one GPU (KernelBench-sized problems).

    python benchmarks/verifier_gpu.py --kernelbench ../shared/data/kernelbench --out results/

For each hand-written candidate in benchmarks/candidates/level*/: one cold verification
(reference build and torch.compile included), then `--repeats` warm verifications submitted from
`--workers` threads. Reports verdicts per minute (warm), latency per verdict, and the run-to-run
spread of the candidate's measured median across the warm verifications.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from drtriton.bench import find_candidate  # noqa: E402
from drtriton.problem import load_kernelbench  # noqa: E402
from drtriton.verify import Verifier, VerifyConfig  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernelbench", required=True, type=Path)
    ap.add_argument("--candidates", type=Path, default=ROOT / "benchmarks" / "candidates")
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--only", help="comma-separated problem names")
    args = ap.parse_args()

    problems = []
    for level in (1, 2):
        for p in load_kernelbench(args.kernelbench / f"level{level}.jsonl"):
            path = find_candidate(args.candidates, p)
            if path and (not args.only or p.name in args.only.split(",")):
                problems.append((p, path.read_text()))
    import torch

    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    rows = []
    with Verifier(VerifyConfig(device="cuda", workers=args.workers)) as ver:
        ver.pool.warm()  # start the workers first: their start-up is not a verdict's latency
        for problem, source in problems:
            t0 = time.monotonic()
            cold = ver.verify(problem, source)
            cold_s = time.monotonic() - t0
            print(f"{problem.name}: cold {cold_s:.1f} s: {cold.summary}", flush=True)
            if not cold.correct:
                print("   ", cold.reasons, flush=True)
                rows.append({"problem": problem.name, "cold_s": cold_s, "cold": cold.to_dict()})
                continue
            t0 = time.monotonic()
            with ThreadPoolExecutor(args.workers) as pool:
                warm = list(pool.map(lambda _: ver.verify(problem, source), range(args.repeats)))
            wall = time.monotonic() - t0
            medians = [v.timings.candidate.median_ms for v in warm if v.correct and v.timings]
            spread = (max(medians) - min(medians)) / statistics.median(medians) if medians else None
            row = {
                "problem": problem.name, "cold_s": cold_s, "warm_wall_s": wall,
                "warm_per_minute": 60 * len(warm) / wall,
                "warm_latency_s": statistics.median(v.elapsed_s for v in warm),
                "all_correct": all(v.correct for v in warm),
                "warm_failures": [v.reasons for v in warm if not v.correct],
                "warm_phases_s": [v.phases_s for v in warm],
                "candidate_ms": medians, "eager_ms": cold.timings.eager.median_ms,
                "compile_ms": cold.timings.compiled.median_ms if cold.timings.compiled else None,
                "run_to_run_spread": spread,
                "iqr_over_median": [v.timings.candidate.spread for v in warm if v.timings],
                "speedup_eager": cold.speedup_eager, "speedup_compile": cold.speedup_compile,
                "warm_speedup_eager": [v.speedup_eager for v in warm if v.correct],
                "triton_share": cold.triton_share, "flags": cold.flags,
            }
            rows.append(row)
            for reasons in row["warm_failures"]:
                print(f"    warm check NOT correct: {reasons}", flush=True)
            ratios = row["warm_speedup_eager"]
            row["speedup_spread"] = (max(ratios) - min(ratios)) / statistics.median(ratios) if ratios else None
            print(f"    warm: {row['warm_per_minute']:.1f}/min, latency {row['warm_latency_s']:.1f} s, "
                  f"candidate {statistics.median(medians):.3f} ms, spread {spread:.2%} "
                  f"(of the speedup vs eager: {row['speedup_spread']:.2%})", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "verifier_gpu.json").write_text(json.dumps(rows, indent=1, default=str))
    print("\n| problem | cold s | warm verdicts/min | warm latency s | candidate ms | eager ms | compile ms "
          "| run-to-run spread (time) | (speedup) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "warm_per_minute" not in r:
            print(f"| {r['problem']} | {r['cold_s']:.1f} | not correct | | | | | | |")
            continue
        print(f"| {r['problem']} | {r['cold_s']:.1f} | {r['warm_per_minute']:.1f} | {r['warm_latency_s']:.1f} | "
              f"{statistics.median(r['candidate_ms']):.3f} | {r['eager_ms']:.3f} | "
              f"{r['compile_ms'] if r['compile_ms'] is None else round(r['compile_ms'], 3)} | "
              f"{r['run_to_run_spread']:.2%} | {r['speedup_spread']:.2%} |")


if __name__ == "__main__":
    main()
