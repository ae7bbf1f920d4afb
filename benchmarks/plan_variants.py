"""Every whole-module plan the built-in policy writes for a few KernelBench problems, each
verified and timed (against eager and torch.compile in the same worker): which variant of a
matmul or convolution wins on this GPU (fp32 dot as FMA, as 3 tf32 passes, or the vendor library
with a fused Triton epilogue).

    python3 benchmarks/plan_variants.py --kernelbench .device/kernelbench --ids 1:1,2:12,2:1 --out $OUT
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drtriton.policy.builtin import BuiltinPolicy  # noqa: E402
from drtriton.problem import load_kernelbench  # noqa: E402
from drtriton.verify import Verifier, VerifyConfig  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernelbench", type=Path, required=True, help="folder with level1.jsonl, level2.jsonl")
    ap.add_argument("--ids", required=True, help="LEVEL:ID,... e.g. 1:1,2:12")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    wanted = [tuple(int(x) for x in part.split(":")) for part in args.ids.split(",")]
    rows = []
    with Verifier(VerifyConfig(device=args.device, mode="mixed", workers=1)) as verifier:
        for level, pid in wanted:
            problem = next(p for p in load_kernelbench(args.kernelbench / f"level{level}.jsonl")
                           if p.meta.get("problem_id") == pid)
            graph = verifier.capture(problem)
            for mode in ("strict", "mixed"):
                for cand in BuiltinPolicy(args.device).candidates(problem, graph, mode):
                    if mode == "mixed" and not cand.pytorch_compute:
                        continue  # the same plan as in strict mode
                    t0 = time.monotonic()
                    v = verifier.verify(problem, cand.source, mode=mode)
                    row = {"problem": f"L{level}/{problem.name}", "mode": mode, "plan": cand.description,
                           "correct": v.correct, "summary": v.summary, "speedup_eager": v.speedup_eager,
                           "speedup_compile": v.speedup_compile, "verify_s": round(time.monotonic() - t0, 1)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "plan_variants.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


if __name__ == "__main__":
    main()
