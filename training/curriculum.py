"""The curriculum: train on 1-operator programs, then 2, then 5, moving up a stage when the
held-out pass@1 of the current stage reaches a threshold (50% by default)."""

from __future__ import annotations

import random
from typing import Callable

from torch.utils.data import Dataset

try:
    from transformers import TrainerCallback
except ImportError:  # pragma: no cover
    TrainerCallback = object  # type: ignore[misc,assignment]


class CurriculumDataset(Dataset):
    """Rows of the current stage. Its length is fixed (the sampler asks for indices once), and an
    index wraps around the current stage's rows, so the stage can change during training.
    `as_iterable()` gives the same as an endless `datasets.IterableDataset` (what TRL takes)."""

    def __init__(self, stages: list[list[dict]], length: int | None = None, seed: int = 0):
        if not stages or any(not s for s in stages):
            raise ValueError("every curriculum stage needs at least one prompt")
        self.stages = stages
        self.stage = 0
        self.length = length or max(len(s) for s in stages)
        self.seed = seed

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> dict:
        rows = self.stages[self.stage]
        return rows[i % len(rows)]

    def rows(self):
        """Endless: a shuffled pass over the current stage, then another (of whatever stage is
        current by then)."""
        rng = random.Random(self.seed)
        while True:
            order = list(range(len(self.stages[self.stage])))
            rng.shuffle(order)
            stage = self.stage
            for i in order:
                if self.stage != stage:  # moved on: start drawing from the new stage
                    break
                yield self.stages[stage][i]

    def as_iterable(self):
        from datasets import IterableDataset

        columns = list(self.stages[0][0])
        return IterableDataset.from_generator(lambda: ({c: r[c] for c in columns} for r in self.rows()))

    @property
    def last_stage(self) -> bool:
        return self.stage == len(self.stages) - 1

    def advance(self) -> bool:
        if self.last_stage:
            return False
        self.stage += 1
        return True


class CurriculumCallback(TrainerCallback):
    """Every `every` steps, measure the held-out pass@1 of the current stage with `evaluate`
    (rows -> rate) and move to the next stage when it reaches `threshold`."""

    def __init__(self, dataset: CurriculumDataset, heldout: list[list[dict]],
                 evaluate: Callable[[list[dict]], float], threshold: float = 0.5, every: int = 10,
                 log: Callable[[dict], None] | None = None):
        self.dataset = dataset
        self.heldout = heldout
        self.evaluate = evaluate
        self.threshold = threshold
        self.every = every
        self.log = log or (lambda record: None)
        self.history: list[dict] = []

    def check(self, step: int, advance: bool = True) -> None:
        stage = self.dataset.stage
        rate = self.evaluate(self.heldout[stage])
        advanced = advance and rate >= self.threshold and self.dataset.advance()
        record = {"step": step, "stage": stage, "heldout_pass1": rate, "advanced": bool(advanced)}
        self.history.append(record)
        self.log(record)

    def restore(self, history: list[dict]) -> None:
        """Where a resumed run left off: its checks so far, and the stage they reached."""
        self.history = list(history)
        if history:
            self.dataset.stage = min(history[-1]["stage"] + int(history[-1]["advanced"]), len(self.dataset.stages) - 1)

    def on_train_begin(self, args, state, control, **kwargs):
        """The starting checkpoint's rate (after SFT), the baseline RL is measured against."""
        if state.global_step == 0:
            self.check(0, advance=False)
        return control

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % self.every == 0:
            self.check(state.global_step)
        return control
