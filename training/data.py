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
from dataclasses import dataclass
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


def sft_pairs(programs: list[dict], verifier: Verifier, teacher_policies: list | None = None,
              budget_s: float = 120.0, mode: str = "strict",
              progress: Callable[[int, int, bool], None] | None = None) -> list[dict]:
    """Chats (`messages`) teaching each program's verified module. `teacher_policies`: None for
    the built-in policy, else model policies (then only their verified answers are kept)."""
    pairs = []
    for i, record in enumerate(programs):
        problem = from_source(record["code"], "Model", name=record["id"])
        search = Search(problem, verifier, SearchConfig(mode=mode, budget_s=budget_s,
                                                        builtin=teacher_policies is None),
                        policies=teacher_policies or [])
        for _ in search.run():
            pass
        result = search.result
        if result.correct:
            messages = build_messages(problem.source, problem.candidate_class, mode)
            messages.append({"role": "assistant", "content": answer(result.source)})
            pairs.append({"id": record["id"], "k": record["k"], "ops": record["ops"], "messages": messages,
                          "teacher": result.policy})
        if progress:
            progress(i + 1, len(programs), result.correct)
    return pairs


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
