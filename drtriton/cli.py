"""The `drtriton` command: convert (the main job), verify, bench, doctor.

Exit codes: 0 success (the candidate is correct), 1 a completed check that found no correct
candidate, 2 usage errors (bad arguments, unreadable or broken problem files).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import re
import sys
import time
from pathlib import Path

from .problem import ProblemError, load_file, load_problems


class UsageError(Exception):
    pass


def _device_args(p: argparse.ArgumentParser, search: bool = False) -> None:
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="where to check: cuda times on the GPU; cpu runs kernels in the Triton interpreter")
    if search:
        p.add_argument("--mode", choices=["auto", "strict", "mixed"], default="auto",
                       help="auto (default): strict first, then mixed for what Triton does not cover; "
                            "strict: only Triton computes in forward; mixed: PyTorch ops allowed and reported")
    else:
        p.add_argument("--mode", choices=["strict", "mixed"], default="strict",
                       help="strict: only Triton computes in forward; mixed: PyTorch ops allowed and reported")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S", help="limit for each step of a check")
    p.add_argument("--workers", type=int, default=2, help="candidate worker processes")
    p.add_argument("--cuda-graph", action="store_true",
                   help="also time forward replayed as a CUDA graph (drtriton.cuda_graph.CUDAGraphed), "
                        "beside torch.compile(mode='reduce-overhead'); reported apart (GPU)")


def _gpus_arg(p, what: str) -> None:
    p.add_argument("--gpus", default="all",
                   help=f"with a CUDA device: 'all' (default: every visible GPU, {what} dealt out to them, "
                        "--workers candidate workers on each) or a list such as 0,1")


def _make_verifier(args, gpus: str | None = None, host_workers: int | None = None):
    from .verify import Verifier, VerifyConfig

    try:
        # (a search passes its mode with each check; auto starts strict)
        config = VerifyConfig(device=args.device, mode="strict" if args.mode == "auto" else args.mode,
                              timeout_s=args.timeout,
                              workers=args.workers, cuda_graph=args.cuda_graph, gpus=gpus, host_workers=host_workers)
        return Verifier(config)
    except ValueError as e:
        raise UsageError(str(e)) from None


@contextlib.contextmanager
def _make_verifiers(args):
    """One verifier per GPU of `--gpus` on a CUDA device (one GPU: as `_make_verifier`); one
    verifier on the CPU. Closed on the way out."""
    from .verify.gpus import choose_gpus
    from .verify.verifier import resolve_device

    try:
        gpus = choose_gpus(args.gpus) if resolve_device(args.device) == "cuda" else []
    except ValueError as e:
        raise UsageError(str(e)) from None
    verifiers = []
    try:
        if len(gpus) > 1:
            for g in gpus:  # the host's cores shared among every GPU's workers
                verifiers.append(_make_verifier(args, gpus=g, host_workers=args.workers * len(gpus)))
        else:
            verifiers.append(_make_verifier(args, gpus=gpus[0] if gpus and args.gpus not in (None, "all") else None))
        yield verifiers
    finally:
        for v in verifiers:
            v.close()


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def progress_bar(total: int, unit: str, disable: bool | None = None):
    """A progress bar on stderr with the item in hand and the time left; shown on a terminal
    only (`disable=None`), while the per-item lines written through it always are."""
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, file=sys.stderr, disable=disable, dynamic_ncols=True, leave=False)


def format_verdict(v) -> str:
    lines = [v.summary]
    for r in v.reasons[1:6]:
        lines.append(f"  also: {r}")
    for t in v.trials:
        mark = "ok " if t.passed else "BAD"
        head = f"  {mark} trial {t.index + 1} ({t.phase.replace('_', ' ')})"
        if t.max_abs_error is None:
            lines.append(f"{head}: {t.note}")
        else:
            lines.append(f"{head}: max abs err {t.max_abs_error:.3g}, rel err norm {t.rel_error_norm:.2e}"
                         + (f"; {t.note}" if t.note else ""))
    if v.timings:
        t = v.timings
        lines.append(f"  candidate {t.candidate.median_ms:.4f} ms (IQR/median {t.candidate.spread:.1%}), "
                     f"eager {t.eager.median_ms:.4f} ms"
                     + (f", torch.compile {t.compiled.median_ms:.4f} ms" if t.compiled else
                        f", torch.compile: {t.compile_note or 'not measured'}"))
    if v.graph:
        g = v.graph
        lines.append("  replayed as a CUDA graph: " + (
            f"{g.candidate.median_ms:.4f} ms, eager {g.eager.median_ms:.4f} ms"
            + (f", torch.compile(mode='reduce-overhead') {g.compiled.median_ms:.4f} ms" if g.compiled else "")
            if g.candidate else "") + (f"{'; ' if g.candidate else ''}{g.note}" if g.note else ""))
    if v.triton_kernels:
        lines.append(f"  Triton kernels: {', '.join(v.triton_kernels)}")
    if v.shapes_checked:
        lines.append("  input shapes checked: " + "; ".join(
            " ".join(str(tuple(s)) for s in config) or "no tensors" for config in v.shapes_checked))
    if v.pytorch_ops:
        lines.append("  PyTorch ops in forward: " + ", ".join(f"{k} x{n}" for k, n in sorted(v.pytorch_ops.items())))
    for f in v.flags:
        lines.append(f"  flag: {f}")
    lines.append(f"  device {v.device}, mode {v.settings.get('mode')}, {v.elapsed_s:.1f} s")
    return "\n".join(lines)


def cmd_verify(args) -> int:
    try:
        problem = load_file(args.ref, args.cls)
    except ProblemError as e:
        raise UsageError(str(e)) from None
    try:
        source = Path(args.cand).read_text()
    except OSError as e:
        raise UsageError(f"cannot read {args.cand}: {e.strerror}") from None
    with _make_verifier(args) as verifier:
        progress = None if args.json else (lambda msg: _stderr(f"... {msg}"))
        verdict = verifier.verify(problem, source, progress=progress)
    if args.json:
        print(verdict.to_json(indent=2))
    else:
        print(format_verdict(verdict))
    if verdict.status == "error":
        return 2
    return 0 if verdict.correct else 1


def _id_set(text: str) -> set[int]:
    """`1-30,45` -> {1, ..., 30, 45}."""
    ids: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.strip().partition("-")
            ids |= set(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise UsageError(f"--ids {text!r}: expected numbers and ranges like 1-30,45") from None
    return ids


def cmd_bench(args) -> int:
    from .bench import Claims, run_bench, run_search_bench, summarize, write_report

    try:
        problems = load_problems(args.problems)
    except ProblemError as e:
        raise UsageError(str(e)) from None
    if args.ids:
        wanted = _id_set(args.ids)
        have = [p.meta["problem_id"] for p in problems if p.meta.get("problem_id") is not None]
        if not have:  # a folder of problem files: nothing carries an id
            raise UsageError(f"--ids: the problems in {args.problems} have no ids (KernelBench's JSONL "
                             "have them); use --limit N, or name one file")
        problems = [p for p in problems if p.meta.get("problem_id") in wanted]
        if not problems:
            raise UsageError(f"--ids {args.ids}: none of {args.problems}'s problems has these ids "
                             f"(they run from {min(have)} to {max(have)})")
    if args.limit:
        problems = problems[: args.limit]
    if (args.candidates is None) == (args.policy is None):
        raise UsageError("give either --candidates DIR (verify those) or --policy NAME (convert each)")
    policies = _policies(args) if args.policy else []
    candidates = Path(args.candidates) if args.candidates is not None else None
    if candidates is not None and not candidates.is_dir():
        raise UsageError(f"--candidates {candidates}: not a folder")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    claims = Claims(Path(args.claims)) if args.claims else None  # shards of one set: see --claims
    # Each verdict is appended as it comes, so a run cut off part-way keeps what it finished
    # (the final report rewrites the file in problem order).
    started = time.monotonic()
    with open(out / "verdicts.jsonl", "w") as partial, _make_verifiers(args) as verifiers:

        bar = progress_bar(total=len(problems), unit="problem")

        def progress(done, total, entry):
            v = entry.verdict
            what = entry.reason or "no candidate" if v is None else v.summary
            bar.write(f"[{done}/{total}] {entry.problem.name}: {what}", file=sys.stderr)
            bar.set_postfix_str(entry.problem.name[:40], refresh=False)
            bar.update(1)
            partial.write(json.dumps(entry.to_dict()) + "\n")
            partial.flush()

        if candidates is not None:
            entries = run_bench(problems, candidates, verifiers, progress, mode=args.mode, claims=claims)
            what = f"candidates in {candidates}"
        else:
            from .search import SearchConfig

            config = SearchConfig(mode=args.mode, budget_s=args.budget, builtin=not args.no_builtin)
            entries = run_search_bench(problems, verifiers, config, out, progress, policies, claims=claims)
            what = f"{args.policy} policy with search, budget {args.budget:g} s"
    bar.close()
    summary = summarize(entries)
    summary["gpus"] = len(verifiers) if verifiers[0].device == "cuda" else 0
    summary["wall_s"] = round(time.monotonic() - started, 1)
    summary["verdicts_per_minute"] = round(len(entries) / max(summary["wall_s"], 1e-9) * 60, 2)
    device = verifiers[0].device + (f" x{len(verifiers)}" if len(verifiers) > 1 else "")
    write_report(entries, summary, out, f"drtriton bench: {args.problems} ({what}; {device}, {args.mode})")
    print(f"{summary['correct']}/{summary['problems']} correct; "
          f"fast_1 vs eager {summary['fast_p_eager']['1.0']:.1%}, "
          f"vs torch.compile {summary['fast_p_compile']['1.0']:.1%} "
          f"({summary['fast_p_eager_heavy_in_triton']['1.0']:.1%} / "
          f"{summary['fast_p_compile_heavy_in_triton']['1.0']:.1%} with GEMM, conv and attention in Triton); "
          f"report in {out}/report.md")
    return 0 if summary["correct"] or not entries else 1  # (a shard that found nothing left to claim: 0)


def _policies(args) -> list:
    from .policy.registry import model_policies

    if args.no_builtin and args.policy == "builtin":
        raise UsageError("--no-builtin needs a model policy (--policy openai or hf)")
    try:
        return model_policies(args.policy, args.endpoint, args.model, device=args.device, samples=args.samples)
    except ValueError as e:
        raise UsageError(str(e)) from None


def cmd_serve_model(args) -> int:
    from .policy.models import ModelError
    from .serve import serve

    try:
        server = serve(args.path, args.host, args.port, args.name, args.device)
    except ModelError as e:
        raise UsageError(str(e)) from None
    except OSError as e:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {e.strerror}") from None
    _stderr(f"serving {server.name} at {server.url} (OpenAI-compatible; Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _policy_args(p: argparse.ArgumentParser, default: str | None) -> None:
    p.add_argument("--policy", default=default, choices=["builtin", "openai", "hf"],
                   help="who writes the kernels: the built-in policy, an OpenAI-compatible endpoint (vLLM, "
                        "SGLang, drtriton serve-model) or a local transformers checkpoint")
    p.add_argument("--endpoint", help="openai: the server, e.g. http://localhost:8000/v1")
    p.add_argument("--model", help="openai: the served model name; hf: the checkpoint folder")
    p.add_argument("--samples", type=int, default=1, help="model candidates per request")
    p.add_argument("--no-builtin", action="store_true",
                   help="leave the built-in policy out (by default its result is the baseline to beat)")


def cmd_convert(args) -> int:
    from .search import Search, SearchConfig
    from .verify.gpus import VerifierGroup

    try:
        problem = load_file(args.file, args.cls)
    except ProblemError as e:
        raise UsageError(str(e)) from None
    if args.budget <= 0:
        raise UsageError("--budget must be positive")
    policies = _policies(args)
    source_path = Path(args.file)
    out = Path(args.out) if args.out else source_path.with_name(f"{source_path.stem}_triton.py")
    if out.resolve() == source_path.resolve():
        raise UsageError(f"--out {out} would overwrite the source file")
    quiet = args.json
    with _make_verifiers(args) as verifiers:
        # several GPUs: fragments are checked on all of them at once
        verifier = verifiers[0] if len(verifiers) == 1 else VerifierGroup(verifiers)
        config = SearchConfig(mode=args.mode, budget_s=args.budget, builtin=not args.no_builtin)
        search = Search(problem, verifier, config, policies=policies)
        bar = progress_bar(total=0, unit="fragment", disable=True if quiet else None)
        planned: set[str] = set()  # the current plan's fragments, ticked off as each is verified
        for event in search.run():
            if quiet:
                continue
            d = event.data
            if event.kind == "status":
                if "fragments" in d:
                    planned = set(d["fragments"])
                    bar.reset(total=len(planned))
                bar.write(f"... {d['message']}", file=sys.stderr)
            elif event.kind == "candidate":
                tokens = f", {d['tokens']} tokens" if d.get("tokens") else ""
                bar.write(f"  [{d['id']}] {d['fragment']} ({d['policy']}): {d['summary']} ({d['seconds']:.1f} s{tokens})",
                          file=sys.stderr)
                bar.set_postfix_str(d["fragment"][:40], refresh=False)
                if d["fragment"] in planned:
                    planned.discard(d["fragment"])
                    bar.update(1)
        bar.close()
        result = search.result
    if result.correct:
        out.write_text(result.source)
    if args.keep:
        kept = keep_candidates(result, Path(args.keep))
        _stderr(f"kept the {len(kept)} verified candidates' sources in {args.keep}")
    record = result.to_dict()
    record["output"] = str(out) if result.correct else None
    record["class"] = problem.candidate_class
    if args.json:
        print(json.dumps(record, indent=2, default=str))
    else:
        print(format_conversion(result, out, problem))
    return 0 if result.correct else 1


def keep_candidates(result, folder: Path) -> list[Path]:
    """Every verified candidate's source as a file, named by id, fragment and status, its
    verdict in a comment on top: failed attempts can be read, edited and verified again."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for a in result.attempts:
        if not a.source:
            continue
        slug = re.sub(r"[^A-Za-z0-9]+", "_", a.fragment).strip("_")[:40] or "module"
        path = folder / f"{a.id:03d}_{slug}_{a.verdict.status}.py"
        path.write_text(f"# candidate {a.id}, {a.fragment}, by the {a.policy} policy: {a.verdict.summary}\n" + a.source)
        paths.append(path)
    return paths


def offending_line(attempt) -> str:
    """`line N: <the code there>` when the attempt's first reason names a line of its source."""
    reasons = attempt.verdict.reasons
    m = re.match(r"line (\d+)\b", reasons[0]) if reasons else None
    lines = attempt.source.splitlines()
    if m is None or not 0 < int(m.group(1)) <= len(lines):
        return ""
    return f"line {m.group(1)}: {lines[int(m.group(1)) - 1].strip()}"


def format_conversion(result, out: Path, problem) -> str:
    if not result.correct:
        lines = [f"no correct Triton module found for {problem.class_name}: {result.reason}"]
        last = next((a for a in reversed(result.attempts) if a.source and offending_line(a)), None)
        if last is not None:
            lines.append(f"  candidate {last.id} ({last.fragment}) fails at {offending_line(last)}")
        if result.attempts:
            lines.append(f"  ({len(result.attempts)} candidates tried: --keep DIR keeps their sources, "
                         "--json prints them)")
        return "\n".join(lines)
    v = result.verdict
    lines = [f"wrote {out} (class {problem.candidate_class})", f"  {v.summary}",
             f"  written by: the {result.policy} policy, {result.mode} mode", f"  plan: {result.plan}"]
    lines += [f"  left to PyTorch: {note}" for note in result.fallbacks]
    if v.timings:
        t = v.timings
        lines.append(f"  candidate {t.candidate.median_ms:.4f} ms, eager {t.eager.median_ms:.4f} ms"
                     + (f", torch.compile {t.compiled.median_ms:.4f} ms" if t.compiled else ""))
    lines.append(f"  {len(result.attempts)} candidates verified in {result.seconds:.1f} s on {v.device}")
    return "\n".join(lines)


EXTRAS = {  # what each optional part needs (pyproject.toml's extras)
    "server (editors)": ("pygls", "lsprotocol"),
    "models (hf policy, serve-model)": ("transformers",),
    "training": ("ortools", "trl", "transformers", "datasets", "accelerate"),
}


def environment_report() -> list[tuple[str, str]]:
    """What `drtriton doctor` prints: versions, the device, the interpreter, the extras."""
    import os

    from . import __version__

    rows = [("drtriton", __version__), ("python", sys.version.split()[0])]
    for name in ("torch", "triton"):
        try:
            rows.append((name, importlib.import_module(name).__version__))
        except Exception as e:  # a broken install is what doctor is for
            rows.append((name, f"NOT USABLE: {type(e).__name__}: {e}"))
    try:
        import torch

        if torch.cuda.is_available():
            n = torch.cuda.device_count()
            rows.append(("CUDA device", f"{torch.cuda.get_device_name(0)} ({n} visible; CUDA {torch.version.cuda})"))
        else:
            rows.append(("CUDA device", "none: checks run kernels in the Triton interpreter, speed is not measured"))
    except Exception as e:
        rows.append(("CUDA device", f"unknown ({type(e).__name__}: {e})"))
    rows.append(("TRITON_INTERPRET", os.environ.get("TRITON_INTERPRET", "unset (the verifier sets it on CPU)")))
    for part, modules in EXTRAS.items():
        rows.append((part, _extra_state(modules)))
    return rows


def _extra_state(modules: tuple[str, ...]) -> str:
    """'installed', 'missing a, b', or 'NOT USABLE: ...' for a package that is there but does not
    import (a half-upgraded environment: found on disk, broken when the server starts)."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        return "missing " + ", ".join(missing)
    for m in modules:
        try:
            importlib.import_module(m)
        except Exception as e:
            return f"NOT USABLE: {m}: {type(e).__name__}: {e}"
    return "installed"


def cmd_doctor(args) -> int:
    rows = environment_report()
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    return 0 if not any(v.startswith("NOT USABLE") for _, v in rows) else 1


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(prog="drtriton", description="Turn PyTorch modules into verified Triton.")
    parser.add_argument("--version", action="version", version=f"drtriton {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("doctor", help="versions, the device, the Triton interpreter, the optional parts installed")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("verify", help="check a Triton candidate against a PyTorch reference")
    p.add_argument("ref", help="the reference: a KernelBench file (class Model) or a file with --class")
    p.add_argument("cand", help="the candidate file (class ModelNew or <Class>Triton)")
    p.add_argument("--class", dest="cls", help="the reference class in REF")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    _device_args(p)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("convert", help="convert an nn.Module to verified Triton (the main job)")
    p.add_argument("file", help="a Python file with the module and its get_inputs/get_init_inputs")
    p.add_argument("--class", dest="cls", help="the nn.Module class to convert (default: Model, or the only one)")
    _policy_args(p, "builtin")
    p.add_argument("--budget", type=float, default=600.0, metavar="SECONDS", help="time for the search")
    p.add_argument("--out", help="where to write the module (default: <stem>_triton.py beside FILE)")
    p.add_argument("--json", action="store_true", help="print a JSON record instead of the report")
    p.add_argument("--keep", metavar="DIR", help="write every verified candidate's source here, failed ones too")
    _gpus_arg(p, "the fragments' checks")
    _device_args(p, search=True)
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("bench", help="verify many candidates and report KernelBench metrics")
    p.add_argument("problems", help="kernelbench:level1 or kernelbench:level2 (shipped), a KernelBench JSONL, "
                   "a folder of problem files, or one file")
    p.add_argument("--candidates", help="verify the modules in this folder (<name>.py or level<L>/<name>.py)")
    _policy_args(p, None)
    p.add_argument("--budget", type=float, default=300.0, metavar="SECONDS", help="search time per problem")
    p.add_argument("--out", default="bench-out", help="where to write verdicts, summary and report")
    p.add_argument("--ids", help="only these problem ids: numbers and ranges, e.g. 1-30,45")
    p.add_argument("--limit", type=int, help="only the first N problems")
    _gpus_arg(p, "problems")
    p.add_argument("--claims", metavar="DIR",
                   help="share the problems with other bench processes given the same DIR: each runs the "
                        "problems it claims first (array jobs on a shared filesystem; merge their --out "
                        "folders with benchmarks/merge_bench.py)")
    _device_args(p, search=True)
    p.set_defaults(func=cmd_bench)
    p = sub.add_parser("serve-model", help="serve a local checkpoint over an OpenAI-compatible API")
    p.add_argument("path", help="a transformers checkpoint folder")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--name", help="the model name clients ask for (default: the folder's name)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.set_defaults(func=cmd_serve_model)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except UsageError as e:
        _stderr(f"drtriton {args.command}: {e}")
        return 2
    except KeyboardInterrupt:
        _stderr("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
