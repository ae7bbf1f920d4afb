"""Policies by name: what `--policy` (CLI) and the `drtriton.policy` setting (editor) select.

The built-in policy always takes part unless switched off; a model-backed policy adds its own
candidates, which compete with the built-in ones in the search.
"""

from __future__ import annotations

POLICIES = ("builtin", "openai", "hf")


def model_policies(name: str, endpoint: str | None = None, model: str | None = None,
                   device: str = "cpu", samples: int = 1) -> list:
    """The model-backed policies for a `--policy` name (none for `builtin`). Raises ValueError
    with what is missing."""
    if name == "builtin":
        return []
    if name == "openai":
        if not endpoint or not model:
            raise ValueError("--policy openai needs --endpoint URL (e.g. http://localhost:8000/v1) and --model NAME")
        from .models import OpenAIPolicy

        return [OpenAIPolicy(endpoint, model, samples=samples)]
    if name == "hf":
        if not model:
            raise ValueError("--policy hf needs --model PATH (a local transformers checkpoint)")
        from .models import HFPolicy, ModelError

        try:
            return [HFPolicy(model, device=device, samples=samples)]
        except ModelError as e:
            raise ValueError(str(e)) from None
    raise ValueError(f"unknown policy {name!r}; choose from: {', '.join(POLICIES)}")
