"""Generating program sets: one program per candidate index, in parallel, deduplicated.

Candidate ``(k, i)`` is a pure function of (seed, k, i, bounds): its random stream is seeded by
those, so results do not depend on the number of workers. Its operator sequence is drawn
uniformly from the vocabulary; the structure is wired and sized (``structure``, ``solve``);
when a sequence cannot be sized after ``Knobs.attempts`` wirings it is abandoned and a new
sequence drawn (counted in the manifest, as it biases the histogram slightly).

Candidates are consumed per k in index order and kept until each k has its quota of distinct
programs, so the same seed gives the same programs with any ``--workers``.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from drtriton.ops import SYNTH_NAMES, VOCABULARY
from drtriton.training.synth import coverage, execute
from drtriton.training.synth.canon import canonical_key
from drtriton.training.synth.config import Bounds, ConfigError, Knobs
from drtriton.training.synth.render import render, shapes_by_name
from drtriton.training.synth.solve import explain, flops_window, solve
from drtriton.training.synth.structure import StructureError, sample_graph

#: operator sequences one candidate may abandon before it reports a failure
MAX_SEQUENCES = 20
#: give up when a k has produced this many candidates per wanted program without filling up
MAX_CANDIDATES_PER_PROGRAM = 20


class SynthesisError(RuntimeError):
    """Generation cannot succeed with these settings (the message says which constraint)."""


@dataclass
class Program:
    """A generated program and its metadata (one line of programs.jsonl)."""

    id: str
    code: str
    ops: list[str]
    k: int
    flops: int
    shapes: dict[str, list[int]]
    attrs: list[dict]
    key: str = field(repr=False, default="")

    def record(self) -> dict:
        return {"id": self.id, "code": self.code, "ops": self.ops, "k": self.k, "flops": self.flops,
                "shapes": self.shapes, "attrs": [_jsonable(a) for a in self.attrs]}


def _jsonable(attrs: dict) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()}


@dataclass
class Candidate:
    k: int
    index: int
    program: Program | None
    abandoned: list[list[str]]  # operator sequences given up


def make_program(seed: int, k: int, index: int, bounds: Bounds, knobs: Knobs = Knobs(),
                 names: Sequence[str] | None = None, check: bool = True) -> Candidate:
    """Candidate ``index`` at difficulty ``k``; ``names`` forces the operator sequence (then
    nothing is redrawn); ``check`` runs the program (``execute.check``) before keeping it."""
    rng = random.Random(f"drtriton-synth:{seed}:{k}:{index}")
    abandoned: list[list[str]] = []
    for _ in range(1 if names is not None else MAX_SEQUENCES):
        sequence = list(names) if names is not None else [rng.choice(SYNTH_NAMES) for _ in range(k)]
        for attempt in range(knobs.attempts):
            try:
                graph = sample_graph(sequence, rng, knobs)
            except StructureError:
                continue
            # most attempts draw a FLOP band; the last ones use the whole [min, max] range
            window = flops_window(rng, bounds) if attempt < knobs.attempts - 2 else None
            solution = solve(graph, bounds, rng, window)
            if solution is None:
                continue
            code = render(graph, solution)
            if check:
                try:
                    execute.check(code, solution.shapes[graph.output])
                except execute.Refused:
                    continue
            key = canonical_key(graph, solution)
            program = Program(id=f"k{k}-{key[:12]}", code=code, ops=sequence, k=k, flops=solution.total_flops,
                              shapes=shapes_by_name(graph, solution), attrs=solution.attrs, key=key)
            return Candidate(k, index, program, abandoned)
        abandoned.append(sequence)
    return Candidate(k, index, None, abandoned)


def diagnose(sequence: Sequence[str], bounds: Bounds, seed: int = 0) -> list[str]:
    """The constraints that make a sequence infeasible, on a few wirings (empty if feasible)."""
    rng = random.Random(f"drtriton-diagnose:{seed}")
    reasons: Counter = Counter()
    for _ in range(5):
        try:
            graph = sample_graph(list(sequence), rng)
        except StructureError as exc:
            reasons[f"structure: {exc}"] += 1
            continue
        core = explain(graph, bounds)
        if not core:
            return []
        reasons[", ".join(core)] += 1
    return [reason for reason, _ in reasons.most_common()]


def describe_failure(sequence: Sequence[str], bounds: Bounds) -> str:
    reasons = diagnose(sequence, bounds) or ["no constraint is infeasible; the randomised search kept failing"]
    return (f"cannot generate programs of operators {list(sequence)} with min_flops={bounds.min_flops}, "
            f"max_flops={bounds.max_flops}, max_numel={bounds.max_numel}: infeasible constraints: {reasons[0]}")


def preflight(bounds: Bounds, knobs: Knobs = Knobs(), names: Iterable[str] = SYNTH_NAMES) -> None:
    """Check that every operator alone fits the bounds; a SynthesisError names the constraint."""
    for name in names:
        for index in range(3):
            if make_program(0, 1, index, bounds, knobs, names=[name], check=False).program is not None:
                break
        else:
            reasons = diagnose([name], bounds)
            if reasons:
                raise SynthesisError(f"operator {name!r} cannot fit the bounds (min_flops={bounds.min_flops}, "
                                     f"max_flops={bounds.max_flops}, max_numel={bounds.max_numel}): "
                                     f"infeasible constraints: {reasons[0]}")


@dataclass
class _Job:
    seed: int
    bounds: Bounds
    knobs: Knobs

    def __call__(self, item: tuple[int, int]) -> Candidate:
        k, index = item
        return make_program(self.seed, k, index, self.bounds, self.knobs)


@dataclass
class Result:
    programs: list[Program]
    stats: dict


class Progress:
    """Plain-text progress on stderr, at most a few updates a second."""

    def __init__(self, total: int, stream=sys.stderr, enabled: bool = True):
        self.total, self.stream, self.enabled = total, stream, enabled
        self.start = self.last = time.monotonic()

    def update(self, done: int, tried: int, force: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self.last < 0.5 and not force):
            return
        self.last = now
        rate = done / max(now - self.start, 1e-9)
        self.stream.write(f"\r[synth] {done}/{self.total} programs ({tried} candidates, {rate:.1f}/s)")
        if force:
            self.stream.write("\n")
        self.stream.flush()


def quotas(n: int, ks: Sequence[int]) -> dict[int, int]:
    return {k: n // len(ks) + (1 if j < n % len(ks) else 0) for j, k in enumerate(ks)}


def generate(n: int, ks: Sequence[int], seed: int, bounds: Bounds, *, workers: int = 1, knobs: Knobs = Knobs(),
             progress: bool = False, on_program: Callable[[Program], None] | None = None) -> Result:
    """``n`` distinct programs split evenly over difficulties ``ks``."""
    if n < 0:
        raise ConfigError("the number of programs must be >= 0")
    start = time.monotonic()
    wanted = quotas(n, ks)
    kept: dict[int, list[Program]] = {k: [] for k in ks}
    next_index = {k: 0 for k in ks}
    seen: set[str] = set()
    stats = Counter()
    abandoned: Counter = Counter()
    failed: Counter = Counter()
    bar = Progress(n, enabled=progress)
    pool = multiprocessing.get_context("spawn").Pool(workers) if workers > 1 else None
    job = _Job(seed, bounds, knobs)
    try:
        while any(len(kept[k]) < wanted[k] for k in ks):
            batch = []
            for k in ks:
                missing = wanted[k] - len(kept[k])
                if missing <= 0:
                    continue
                if next_index[k] >= MAX_CANDIDATES_PER_PROGRAM * wanted[k] + 100:
                    _give_up(k, kept[k], wanted[k], next_index[k], abandoned, bounds)
                # a little more than missing: some candidates fail or repeat earlier programs
                count = missing + missing // 20 + (2 * workers if pool else 1)
                batch += [(k, next_index[k] + j) for j in range(count)]
                next_index[k] += count
            results = pool.imap(job, batch, chunksize=4) if pool else map(job, batch)
            for cand in results:
                stats["candidates"] += 1
                for sequence in cand.abandoned:
                    abandoned[tuple(sequence)] += 1
                if cand.program is None:
                    stats["failed"] += 1
                    failed[cand.k] += 1
                    if failed[cand.k] >= 5 and failed[cand.k] > 10 * len(kept[cand.k]):  # hopeless: say why
                        _give_up(cand.k, kept[cand.k], wanted[cand.k], next_index[cand.k], abandoned, bounds)
                elif len(kept[cand.k]) >= wanted[cand.k]:
                    stats["surplus"] += 1
                elif cand.program.key in seen:
                    stats["duplicates"] += 1
                else:
                    seen.add(cand.program.key)
                    kept[cand.k].append(cand.program)
                    if on_program is not None:
                        on_program(cand.program)
                bar.update(sum(map(len, kept.values())), stats["candidates"])
    finally:
        if pool is not None:
            pool.terminate()
    bar.update(sum(map(len, kept.values())), stats["candidates"], force=True)
    programs = [p for k in ks for p in kept[k]]
    elapsed = time.monotonic() - start
    stats.update(abandoned_sequences=sum(abandoned.values()), elapsed_s=round(elapsed, 3))
    stats["programs_per_s"] = round(len(programs) / elapsed, 2) if elapsed > 0 else None
    return Result(programs, dict(stats))


def _give_up(k, kept, wanted, tried, abandoned, bounds):
    if abandoned:
        sequence = abandoned.most_common(1)[0][0]
        raise SynthesisError(describe_failure(sequence, bounds))
    raise SynthesisError(f"found only {len(kept)} distinct programs with k={k} after {tried} candidates "
                         f"(wanted {wanted}): the space of programs is too small for these bounds; "
                         f"raise --max-flops or ask for fewer programs")


def manifest(result: Result, ks: Sequence[int], seed: int, bounds: Bounds) -> dict:
    hist = coverage.histogram(p.ops for p in result.programs)
    per_k = {}
    for k in ks:
        counts = coverage.histogram(p.ops for p in result.programs if p.k == k)
        stat, dof, p_value = coverage.chi_square_uniform([counts[name] for name in SYNTH_NAMES])
        per_k[str(k)] = {"count": sum(1 for p in result.programs if p.k == k), "chi_square": round(stat, 3),
                         "dof": dof, "p_uniform": round(p_value, 6)}
    pairs = coverage.pairs_seen(p.ops for p in result.programs)
    return {
        "vocabulary": list(SYNTH_NAMES),
        "categories": {name: op.category for name, op in VOCABULARY.items()},
        "min_flops": bounds.min_flops, "max_flops": bounds.max_flops, "max_numel": bounds.max_numel,
        "max_dim": bounds.max_dim, "seed": seed, "ks": list(ks), "count": len(result.programs),
        "histogram": {name: hist[name] for name in SYNTH_NAMES},
        "per_k": per_k,
        "pairs_seen": len(pairs), "pairs_total": len(coverage.all_pairs(SYNTH_NAMES)),
        "stats": result.stats,
    }


def write(out: Path, result: Result, ks: Sequence[int], seed: int, bounds: Bounds) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "programs.jsonl.tmp"
    with tmp.open("w") as f:
        for program in result.programs:
            f.write(json.dumps(program.record()) + "\n")
    os.replace(tmp, out / "programs.jsonl")
    (out / "manifest.json").write_text(json.dumps(manifest(result, ks, seed, bounds), indent=2) + "\n")

