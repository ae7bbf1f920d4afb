"""``drtriton-train``: the training pipeline's command line (one subcommand per stage).

Subcommands: ``synth`` (CSP-DAG program synthesis). Later stages (sft, drpo, eval) add a
``_add_<name>`` function registering their parser and a ``cmd_<name>`` function running it.
Bad arguments exit with status 2 and a one-line reason.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path


def _count(text: str) -> int:
    """An integer count; also accepts 1e6 and 1_000_000 spellings."""
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}")
    return int(value)


def _positive(text: str) -> int:
    value = _count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _nonnegative(text: str) -> int:
    value = _count(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def parse_ops(text: str) -> list[int]:
    """``K`` or ``K1-K2`` (inclusive) numbers of compute operators per program."""
    match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    if not match:
        raise argparse.ArgumentTypeError(f"expected K or K1-K2 (e.g. 3 or 1-5), got {text!r}")
    lo = int(match.group(1))
    hi = int(match.group(2)) if match.group(2) else lo
    if lo < 1:
        raise argparse.ArgumentTypeError(f"programs need at least 1 operator, got {text!r}")
    if hi < lo:
        raise argparse.ArgumentTypeError(f"empty range {text!r}: {lo} > {hi}")
    if hi > 50:
        raise argparse.ArgumentTypeError(f"at most 50 operators per program, got {hi}")
    return list(range(lo, hi + 1))


def _add_synth(subparsers) -> None:
    p = subparsers.add_parser("synth", help="generate synthetic KernelBench-format programs (CSP-DAG)",
                              description="Generate distinct random programs of k compute operators drawn "
                                          "uniformly from the vocabulary, sized by CP-SAT within FLOP bounds.")
    p.add_argument("--ops", required=True, type=parse_ops, metavar="K|K1-K2",
                   help="compute operators per program (a range splits the programs evenly)")
    p.add_argument("-n", "--count", required=True, type=_nonnegative, metavar="N", help="number of programs")
    p.add_argument("--seed", type=_count, default=0, help="random seed (the same seed gives the same programs)")
    p.add_argument("--out", required=True, type=Path, metavar="DIR",
                   help="output directory (programs.jsonl, manifest.json)")
    p.add_argument("--workers", type=_positive, default=os.cpu_count() or 1, help="processes (default: all cores)")
    p.add_argument("--min-flops", type=_nonnegative, default=None, help="lower bound on a program's FLOPs")
    p.add_argument("--max-flops", type=_positive, default=None, help="upper bound on a program's FLOPs")
    p.add_argument("--max-numel", type=_positive, default=None,
                   help="largest tensor, in elements (default: min(2^23, max-flops))")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_synth, subparser=p)


def cmd_synth(args, parser: argparse.ArgumentParser) -> int:
    from drtriton.training.synth.config import Bounds, ConfigError
    from drtriton.training.synth.generate import SynthesisError, generate, preflight, write

    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out} exists and is not a directory")
    try:
        bounds = Bounds.make(args.min_flops, args.max_flops, args.max_numel)
        preflight(bounds)
        result = generate(args.count, args.ops, args.seed, bounds, workers=args.workers, progress=not args.quiet)
    except (ConfigError, SynthesisError) as exc:
        parser.error(str(exc))
    except ImportError as exc:  # OR-Tools missing
        print(f"drtriton-train synth: {exc}", file=sys.stderr)
        return 1
    write(args.out, result, args.ops, args.seed, bounds)
    if not args.quiet:
        print(f"wrote {len(result.programs)} programs to {args.out / 'programs.jsonl'}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="drtriton-train", description="DRTriton training pipeline")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_synth(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.func(args, args.subparser)


if __name__ == "__main__":
    sys.exit(main())
