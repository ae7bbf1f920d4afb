"""Training data from synthetic programs: verified SFT pairs, and RL prompts by curriculum stage.

- SFT pairs: program -> a Triton module the verifier accepted. Teachers are the built-in policy
  (reproducible, every pair verified) and any OpenAI-compatible endpoint (kept only when the
  verifier accepts). Each pair is a chat in the shared prompt format, so SFT teaches exactly
  what inference will ask.
- RL prompts: the chat prompt of a program plus the columns the reward functions need
  (`problem_source`, `problem_class`), one list per stage (k = 1, 2, 5 by default) and a
  held-out list per stage.

Everything is written as JSONL (one record a line), which `datasets` loads as it is.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable

from drtriton.problem import from_source
from drtriton.prompting import build_messages
from drtriton.search import Search, SearchConfig
from drtriton.verify import Verifier

from .synth.config import Bounds
from .synth.generate import generate


@dataclass
class Programs:
    """Synthetic programs: `programs.jsonl` records (`id`, `code`, `ops`, `k`, ...)."""

    records: list[dict]

    @classmethod
    def synthesize(cls, n: int, ks: Iterable[int], seed: int, bounds: Bounds, workers: int = 1) -> "Programs":
        result = generate(n, list(ks), seed, bounds, workers=workers)
        return cls([p.record() for p in result.programs])

    @classmethod
    def load(cls, path: Path) -> "Programs":
        return cls([json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()])

    def by_k(self, k: int) -> list[dict]:
        return [r for r in self.records if r["k"] == k]


def answer(source: str) -> str:
    """The assistant's turn: the module in a fenced block (what `parse_reply` reads back)."""
    return f"```python\n{source.rstrip()}\n```"


def sft_pairs(programs: list[dict], verifier: Verifier | list[Verifier], teacher_policies: list | None = None,
              search: SearchConfig | None = None, workers: int = 1, budget_s: float | None = None,
              progress: Callable[[int, int, bool], None] | None = None,
              on_pair: Callable[[dict], None] | None = None) -> list[dict]:
    """Chats (`messages`) teaching each program's verified module, in program order.
    `teacher_policies`: None for the built-in policy, else model policies (then only their
    verified answers are kept). `workers` programs are searched at once, spread over the given
    verifiers (several verifiers: several reference workers capturing programs at once).
    `budget_s`: programs not started by then are left out. `on_pair` gets each pair as it is
    verified (in completion order)."""
    verifiers = verifier if isinstance(verifier, list) else [verifier]
    search = search or SearchConfig(budget_s=120.0)
    done, lock = 0, threading.Lock()
    deadline = time.monotonic() + budget_s if budget_s else None

    def teach(index: int) -> dict | None:
        nonlocal done
        if deadline and time.monotonic() > deadline:
            return None
        record = programs[index]
        problem = from_source(record["code"], "Model", name=record["id"])
        # the taught module without _DirectLaunch: launch plumbing (about 700 tokens a module)
        # teaches nothing about kernels, and the verified module is the one taught
        config = replace(search, builtin=teacher_policies is None, direct_launch=False)
        run = Search(problem, verifiers[index % len(verifiers)], config, policies=teacher_policies or [])
        for _ in run.run():
            pass
        result = run.result
        pair = None
        if result.correct:
            messages = build_messages(problem.source, problem.candidate_class, config.mode)
            messages.append({"role": "assistant", "content": answer(result.source)})
            pair = {"id": record["id"], "k": record["k"], "ops": record["ops"], "messages": messages,
                    "teacher": result.policy}
        with lock:
            done += 1
            if pair is not None and on_pair:
                on_pair(pair)
            if progress:
                progress(done, len(programs), result.correct)
        return pair

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="drtriton-teach") as pool:
        return [pair for pair in pool.map(teach, range(len(programs))) if pair is not None]


def rl_prompts(programs: list[dict], mode: str = "strict") -> list[dict]:
    """TRL rows: the conversational prompt (without an answer) and the problem for the rewards."""
    rows = []
    for record in programs:
        problem = from_source(record["code"], "Model", name=record["id"])
        rows.append({"id": record["id"], "k": record["k"],
                     "prompt": build_messages(problem.source, problem.candidate_class, mode),
                     "problem_source": problem.source, "problem_class": problem.class_name})
    return rows


def split_heldout(rows: list[dict], heldout: int) -> tuple[list[dict], list[dict]]:
    """The last `heldout` rows are held out (synthesis order is already random)."""
    return rows[:-heldout] if heldout else rows, rows[-heldout:] if heldout else []


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
