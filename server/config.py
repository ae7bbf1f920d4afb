"""The client's settings, section `drtriton` of `workspace/configuration`."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

DEVICES = ("auto", "cpu", "cuda")
MODES = ("auto", "strict", "mixed")


@dataclass(frozen=True)
class Settings:
    policy: str = "builtin"  # builtin | a model-backed policy (drtriton.policy.registry)
    endpoint: str | None = None  # model policies: an OpenAI-compatible server
    model: str | None = None
    device: str = "auto"  # auto | cpu | cuda
    mode: str = "auto"  # auto (strict, then mixed for what is left) | strict | mixed
    search_budget_s: float = 600.0  # like `drtriton convert --budget`
    output: str = "{stem}_triton.py"  # beside the source; {stem}, {class} and {dir} are replaced
    cuda_graph: bool = False  # also time the converted module replayed as a CUDA graph (GPU)

    @classmethod
    def from_client(cls, raw: object) -> tuple["Settings", list[str]]:
        """Settings from what the client sent, and a line for each value that was refused
        (the default is kept for it)."""
        s, problems = cls(), []
        if not isinstance(raw, dict):
            return s, problems

        def text(key: str) -> str | None:
            v = raw.get(key)
            if v is None or v == "":
                return None
            if not isinstance(v, str):
                problems.append(f"drtriton.{key} must be a string, not {v!r}")
                return None
            return v.strip()

        if (v := text("policy")) is not None:
            s = replace(s, policy=v)
        s = replace(s, endpoint=text("endpoint"), model=text("model"))
        if (v := text("device")) is not None:
            if v in DEVICES:
                s = replace(s, device=v)
            else:
                problems.append(f"drtriton.device must be one of {', '.join(DEVICES)}, not {v!r}")
        if (v := text("mode")) is not None:
            if v in MODES:
                s = replace(s, mode=v)
            else:
                problems.append(f"drtriton.mode must be one of {', '.join(MODES)}, not {v!r}")
        budget = raw.get("searchBudgetSeconds")
        if budget is not None:
            if isinstance(budget, (int, float)) and not isinstance(budget, bool) and budget > 0:
                s = replace(s, search_budget_s=float(budget))
            else:
                problems.append(f"drtriton.searchBudgetSeconds must be a positive number, not {budget!r}")
        graph = raw.get("cudaGraph")
        if graph is not None:
            if isinstance(graph, bool):
                s = replace(s, cuda_graph=graph)
            else:
                problems.append(f"drtriton.cudaGraph must be true or false, not {graph!r}")
        if (v := text("output")) is not None:
            if "{stem}" in v or "{class}" in v:
                s = replace(s, output=v)
            else:
                problems.append(f"drtriton.output must contain {{stem}} or {{class}}, not {v!r}")
        return s, problems

    def output_path(self, source: Path, class_name: str, disambiguate: bool = False) -> Path:
        """Where the converted module goes: relative patterns are beside the source."""
        pattern = self.output
        if disambiguate and "{class}" not in pattern:
            pattern = pattern.replace("{stem}", "{stem}_{class}", 1)
        fields = {"stem": source.stem, "class": class_name, "dir": str(source.parent)}
        try:
            name = pattern.format(**fields)
        except (KeyError, ValueError, IndexError):  # stray braces: the default
            name = Settings.output.format(**fields)
        path = Path(os.path.expanduser(name))
        if not path.is_absolute():
            path = source.parent / path
        return path
