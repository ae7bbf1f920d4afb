"""Where the time goes when converting a problem (a whole network): the search's events with
their times, and each verified candidate's phases (static checks, reference, load, trials with
the first call's compilation, torch.compile, timing). GPU; the corpus files at their full sizes.

    PYTHONPATH=. python3 benchmarks/convert_phases.py corpus/torchvision/resnet18.py [...] --budget 120
"""

import argparse
import tempfile
import time
from pathlib import Path

from drtriton.problem import load_file
from drtriton.search import Search, SearchConfig
from drtriton.verify.verifier import Verifier, VerifyConfig


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+")
    p.add_argument("--budget", type=float, default=120.0)
    p.add_argument("--mode", default="mixed", choices=["strict", "mixed"])
    p.add_argument("--size", default="full", choices=["small", "full"])
    args = p.parse_args()
    work = Path(tempfile.mkdtemp())
    for path in map(Path, args.files):
        copy = work / path.name
        copy.write_text(path.read_text().replace('SIZE = "small"', f'SIZE = "{args.size}"'))
        problem = load_file(str(copy), None)
        t0 = time.monotonic()
        with Verifier(VerifyConfig(device="cuda", mode=args.mode, workers=2)) as verifier:
            search = Search(problem, verifier, SearchConfig(mode=args.mode, budget_s=args.budget))
            for event in search.run():
                d = event.data
                if event.kind == "status":
                    print(f"{time.monotonic() - t0:7.1f} {path.stem} {d['message'][:150]}", flush=True)
                elif event.kind == "candidate":
                    print(f"{time.monotonic() - t0:7.1f} {path.stem} [{d['fragment'][:60]}] {d['summary'][:150]} "
                          f"({d['seconds']:.1f} s)", flush=True)
        for a in search.result.attempts:
            print(f"  attempt {a.id} [{a.fragment[:50]}] {a.verdict.status} {a.seconds:.1f} s {a.verdict.phases_s}")
        print(f"== {path.stem}: correct={search.result.correct}, {time.monotonic() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
