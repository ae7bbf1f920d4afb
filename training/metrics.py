"""Per-step metrics to `metrics.jsonl`, a plot of them, and the confidence interval of a rate.

Each line is what the trainer logged at a step (loss, rewards, correct rate, speed, KL, stage,
where the time went), plus the step. The plot is SVG written by hand, so it needs no plotting
library on the GPU machine or in CI.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

try:
    from transformers import TrainerCallback
except ImportError:  # pragma: no cover
    TrainerCallback = object  # type: ignore[misc,assignment]


class MetricsLog(TrainerCallback):
    def __init__(self, path: Path, extra=None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.extra = extra or (lambda: {})  # values of our own to add (stage, verifier time...)
        self.started = time.monotonic()

    def write(self, record: dict) -> None:
        if int(os.environ.get("RANK", 0)) != 0:  # data parallel: one process writes
            return
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")

    def on_log(self, args, state, control, logs=None, **kwargs):
        record = {"step": state.global_step, "elapsed_s": round(time.monotonic() - self.started, 2)}
        record.update({k: v for k, v in (logs or {}).items() if isinstance(v, (int, float))})
        record.update(self.extra())
        self.write(record)
        return control


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


_COLOURS = ("#2a6", "#c42", "#26c", "#c80", "#808", "#088")


def plot(records: list[dict] | dict[str, list[dict]], keys: list[str], out: Path, title: str) -> Path:
    """Small multiples: one panel per key, value against step; several runs ({name: records})
    share each panel, one colour each, named in a legend."""
    runs = records if isinstance(records, dict) else {"": records}
    width, panel, pad = 640, 140, 40
    panels = []
    for key in keys:
        lines = {name: [(r["step"], r[key]) for r in rows if isinstance(r.get(key), (int, float))]
                 for name, rows in runs.items()}
        lines = {name: pts for name, pts in lines.items() if pts}
        if lines:
            panels.append((key, lines))
    legend = 16 if len(runs) > 1 else 0
    height = pad + legend + panel * max(len(panels), 1)
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           f'font-size="11"><text x="{pad}" y="18">{title}</text>']
    if legend:
        svg += [f'<text x="{pad + 110 * i}" y="{pad + 4}" fill="{_COLOURS[i % len(_COLOURS)]}">{name}</text>'
                for i, name in enumerate(runs)]
    for i, (key, lines) in enumerate(panels):
        top = pad + legend + i * panel
        xs = [x for pts in lines.values() for x, _ in pts]
        ys = [y for pts in lines.values() for _, y in pts]
        x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
        y0, y1 = min(ys), max(ys) if max(ys) > min(ys) else min(ys) + 1
        sx = lambda x: pad + (x - x0) / (x1 - x0) * (width - 2 * pad)  # noqa: E731
        sy = lambda y: top + panel - 25 - (y - y0) / (y1 - y0) * (panel - 40)  # noqa: E731
        svg.append(f'<text x="{pad}" y="{top + 10}">{key} ({y0:.3g} .. {y1:.3g})</text>')
        for name, pts in lines.items():
            colour = _COLOURS[list(runs).index(name) % len(_COLOURS)]
            path = " ".join(f"{'M' if j == 0 else 'L'}{sx(x):.1f},{sy(y):.1f}" for j, (x, y) in enumerate(pts))
            svg.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        svg.append(f'<line x1="{pad}" y1="{top + panel - 25}" x2="{width - pad}" y2="{top + panel - 25}" stroke="#999"/>')
    svg.append("</svg>")
    Path(out).write_text("\n".join(svg) + "\n")
    return Path(out)


def moving_mean(records: list[dict], key: str, window: int) -> list[dict]:
    """`records` with `key` replaced by its mean over the last `window` records that have it
    (a noisy per-step rate, such as 16 rollouts' correct share, made readable)."""
    out, recent = [], []
    for r in records:
        if isinstance(r.get(key), (int, float)):
            recent = (recent + [r[key]])[-window:]
            r = {**r, key: sum(recent) / len(recent)}
        out.append(r)
    return out


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a rate of `successes` in `n` (sound at 0 and n, unlike
    the normal approximation): what a held-out pass@1 of 40% on 200 programs can and cannot tell
    apart (about 33-47%)."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
