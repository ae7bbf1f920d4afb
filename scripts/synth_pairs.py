"""Check that every ordered pair of operators can appear together (k = 2 programs).

    python scripts/synth_pairs.py [--workers 2] [--max-flops F] [--check]

For each ordered pair (a, b), tries a few candidates with the sequence forced to [a, b] and
reports the pairs for which none could be generated, with the constraints that block them.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
import warnings
from functools import partial
from itertools import product


def _try(pair, bounds, check, tries=3):
    from drtriton.training.synth.generate import make_program

    warnings.simplefilter("ignore")
    for index in range(tries):
        if make_program(7, 2, index, bounds, names=list(pair), check=check).program is not None:
            return pair, True
    return pair, False


def main(argv=None) -> int:
    from drtriton.ops import NAMES
    from drtriton.training.synth.config import Bounds
    from drtriton.training.synth.generate import diagnose

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--min-flops", type=int, default=None)
    parser.add_argument("--max-flops", type=int, default=None)
    parser.add_argument("--check", action="store_true", help="also run each program (execution gate)")
    args = parser.parse_args(argv)
    bounds = Bounds.make(args.min_flops, args.max_flops)
    pairs = list(product(NAMES, repeat=2))
    start = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
        results = pool.map(partial(_try, bounds=bounds, check=args.check), pairs, chunksize=16)
    failed = [pair for pair, ok in results if not ok]
    print(f"{len(pairs) - len(failed)} of {len(pairs)} ordered pairs generated "
          f"({time.perf_counter() - start:.0f} s, bounds {bounds}, execution gate {'on' if args.check else 'off'})")
    for pair in failed:
        print(f"  {pair[0]} -> {pair[1]}: {(diagnose(pair, bounds) or ['search kept failing'])[0]}")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
