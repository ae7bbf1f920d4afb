"""``drtriton-train``: the training pipeline's command line (one subcommand per stage).

Subcommands: ``synth`` (CSP-DAG program synthesis), ``teach`` (SFT data only), ``sft``, ``drpo`` and ``eval`` (the runs
of ``runs.py``, configured by a recipe, ``recipes.py``). Each has an ``_add_<name>`` function
registering its parser and a ``cmd_<name>`` function running it. Bad arguments exit with status
2 and a one-line reason.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import replace
from pathlib import Path

from drtriton.problem import KERNELBENCH_DIR


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


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
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


def _run_args(p, init_help: str) -> None:
    p.add_argument("--recipe", required=True, help="tiny or qwen2.5-coder-7b (training/recipes.py)")
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="output folder")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--max-steps", type=int, default=-1, metavar="N", help="stop after N optimiser steps")
    p.add_argument("--init", type=Path, metavar="DIR", help=init_help)
    p.add_argument("--dry-run", action="store_true",
                   help="a reduced model from the recipe's configuration and one step, or --max-steps (no download)")
    p.add_argument("--verifier-workers", type=_positive, default=2, help="verifier processes for rewards")
    p.add_argument("--verifier-gpus", help="CUDA_VISIBLE_DEVICES for the verifier (e.g. 1: not training's GPU)")
    p.add_argument("--host-workers", type=_positive, metavar="N",
                   help="verifier workers on this machine, every run started side by side counted (default: this "
                        "run's): each compiles kernels with its share of the cores")
    p.add_argument("--small", action="store_true", help="the recipe at test size (seconds on a CPU)")
    p.add_argument("--seed", type=_count, help="the recipe's data seed (programs, their order, sampling)")
    p.add_argument("--time-limit", type=_seconds, metavar="SECONDS",
                   help="stop training after the step that passes this many seconds (the model is saved)")


def _add_sft(subparsers) -> None:
    p = subparsers.add_parser("sft", help="supervised fine-tuning on verified program -> Triton pairs")
    _run_args(p, "start from this checkpoint instead of the recipe's model")
    p.add_argument("--teacher-pools", type=_positive, default=1, metavar="N",
                   help="verifier pools teaching at once, each with --verifier-workers workers and its own "
                        "reference worker (which captures every program it teaches)")
    p.add_argument("--hidden", type=_positive, metavar="N", help="a model built from scratch: its hidden size "
                                                                 "(default: the recipe's)")
    p.add_argument("--layers", type=_positive, metavar="N", help="a model built from scratch: its layers")
    p.set_defaults(func=cmd_run, subparser=p, run="sft")


def _add_teach(subparsers) -> None:
    p = subparsers.add_parser("teach", help="only the SFT data: programs taught by the built-in policy, verified "
                                            "(on a CPU through the Triton interpreter); `sft --out` the same folder reuses it")
    _run_args(p, "unused")
    p.add_argument("--teacher-pools", type=_positive, default=1, metavar="N", help="as for sft")
    p.add_argument("--programs", type=_positive, metavar="N", help="programs to teach (default: the recipe's)")
    p.set_defaults(func=cmd_run, subparser=p, run="teach")


def _add_drpo(subparsers) -> None:
    p = subparsers.add_parser("drpo", help="curriculum RL with DRPO's decoupled reward (or GRPO)")
    _run_args(p, "the SFT checkpoint to start from (an `sft` run's model/)")
    p.add_argument("--algorithm", choices=["drpo", "grpo"], default="drpo", help="grpo: the ablation baseline")
    p.add_argument("--stages", help="operators per program by curriculum stage, e.g. 1 (stay at one operator) "
                                    "or 1,2,5 (the recipe's default)")
    p.add_argument("--resume", action="store_true",
                   help="go on from the last checkpoint in --out (saved every few steps and where --time-limit stops)")
    p.set_defaults(func=cmd_run, subparser=p, run="drpo")


def _add_eval(subparsers) -> None:
    p = subparsers.add_parser("eval", help="a checkpoint on held-out synthetic programs and KernelBench")
    _run_args(p, "the checkpoint to evaluate")
    p.add_argument("--kernelbench", type=Path, nargs="?", const=KERNELBENCH_DIR,
                   help="also KernelBench: alone, the shipped Levels 1 and 2; or a folder with level1.jsonl and level2.jsonl")
    p.add_argument("--levels", default="1,2", help="KernelBench levels (default 1,2)")
    p.add_argument("--limit", type=_positive, help="only the first N problems of each level")
    p.add_argument("--heldout", type=_positive, metavar="N",
                   help="held-out synthetic programs for each k (default: the recipe's; 200 tell rates 10 points apart)")
    p.add_argument("--ks", help="the k (operators per program) to evaluate, e.g. 1,2,3 (default: the recipe's stages)")
    p.add_argument("--pass-k", type=_positive, default=1, metavar="K",
                   help="also pass@K: K modules sampled at the recipe's RL temperature, any correct")
    p.set_defaults(func=cmd_run, subparser=p, run="eval")


def cmd_run(args, parser: argparse.ArgumentParser) -> int:
    from drtriton.training import recipes
    from drtriton.training.runs import RunOptions, run_eval, run_rl, run_sft, teach

    try:
        recipe = recipes.get(args.recipe)
    except ValueError as e:
        parser.error(str(e))
    if args.small or args.dry_run:  # a dry run keeps the recipe's model, at test-size data
        recipe = replace(recipe.for_tests(), model=recipe.model) if args.dry_run else recipe.for_tests()
    if args.seed is not None:
        recipe = replace(recipe, data=replace(recipe.data, seed=args.seed))
    if getattr(args, "stages", None):
        try:
            stages = tuple(int(k) for k in args.stages.split(","))
        except ValueError:
            parser.error(f"--stages {args.stages}: expected numbers of operators such as 1,2,5")
        if not stages or min(stages) < 1:
            parser.error(f"--stages {args.stages}: each stage needs at least one operator")
        recipe = replace(recipe, rl=replace(recipe.rl, stages=stages))
    size = {k: getattr(args, k) for k in ("hidden", "layers") if getattr(args, k, None)}
    if size:
        if recipe.model.kind != "tiny":
            parser.error(f"--hidden/--layers size a model built from scratch; recipe {recipe.name} starts from "
                         f"{recipe.model.source}")
        if args.init is not None:
            parser.error("--hidden/--layers size a model built from scratch; --init trains a checkpoint at its own size")
        if size.get("hidden", recipe.model.hidden) % (2 * recipe.model.heads):
            # each head's size must be even (rotary embeddings rotate pairs)
            parser.error(f"--hidden {size['hidden']}: must be a multiple of twice the {recipe.model.heads} "
                         f"attention heads ({2 * recipe.model.heads})")
        recipe = replace(recipe, model=replace(recipe.model, **size))
    if getattr(args, "programs", None):
        recipe = replace(recipe, sft=replace(recipe.sft, programs=args.programs))
    if args.init is not None and not (args.init / "config.json").is_file():
        parser.error(f"--init {args.init}: no checkpoint there (expected config.json)")
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out} is a file")
    options = RunOptions(out=args.out, device=args.device, max_steps=args.max_steps, init=args.init,
                         dry_run=args.dry_run, verifier_workers=args.verifier_workers,
                         verifier_gpus=args.verifier_gpus, time_limit_s=args.time_limit,
                         teacher_pools=getattr(args, "teacher_pools", 1), resume=getattr(args, "resume", False),
                         host_workers=args.host_workers)
    args.out.mkdir(parents=True, exist_ok=True)

    def say(message: str) -> None:
        print(f"[{args.run}] {message}", file=sys.stderr, flush=True)

    try:
        if args.run == "teach":
            pairs = teach(recipe, options, say, budget_s=args.time_limit)
            print(args.out / "data" / "sft.jsonl", f"({len(pairs)} pairs)")
            return 0
        if args.run == "sft":
            run_sft(recipe, options, say)
        elif args.run == "drpo":
            run_rl(recipe, options, args.algorithm, say)
        else:
            levels = tuple(int(x) for x in args.levels.split(","))
            ks = tuple(int(x) for x in args.ks.split(",")) if args.ks else None
            run_eval(recipe, options, args.kernelbench, levels, args.limit, say, heldout=args.heldout, ks=ks,
                     pass_k=args.pass_k)
    except ValueError as e:
        parser.error(str(e))
    print(args.out / "summary.json")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="drtriton-train", description="DRTriton training pipeline")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_synth(subparsers)
    _add_teach(subparsers)
    _add_sft(subparsers)
    _add_drpo(subparsers)
    _add_eval(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.func(args, args.subparser)


if __name__ == "__main__":
    sys.exit(main())
