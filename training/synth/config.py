"""Bounds and knobs of synthesis, with their defaults and validation."""

from __future__ import annotations

from dataclasses import dataclass

#: Defaults: a program runs in well under a second on a GPU and on one CPU core (the generator
#: runs every candidate, so they also bound synthesis time).
MIN_FLOPS = 100_000
MAX_FLOPS = 50_000_000
#: Largest tensor (elements) when the caller gives none: 4M floats (16 MiB), and never more
#: than MAX_FLOPS elements, so small FLOP budgets also give small tensors.
MAX_NUMEL = 1 << 22
#: Largest size a free dimension (an input axis, out_channels, ...) is drawn up to.
MAX_DIM = 4096


class ConfigError(ValueError):
    """Bad synthesis settings (the message says which and why)."""


@dataclass(frozen=True)
class Bounds:
    """Global constraints of the CP-SAT model of every program."""

    min_flops: int = MIN_FLOPS
    max_flops: int = MAX_FLOPS
    max_numel: int = MAX_NUMEL
    max_dim: int = MAX_DIM

    @classmethod
    def make(cls, min_flops: int | None = None, max_flops: int | None = None, max_numel: int | None = None,
             max_dim: int | None = None) -> "Bounds":
        """Bounds from optional settings. A missing FLOP bound defaults to keep a factor of 100 of
        room below (above) the given one; ``max_numel`` defaults to min(MAX_NUMEL, max_flops)."""
        if max_flops is not None:
            hi = int(max_flops)
        else:
            hi = MAX_FLOPS if min_flops is None else max(MAX_FLOPS, 100 * int(min_flops))
        lo = min(MIN_FLOPS, hi // 100) if min_flops is None else int(min_flops)
        numel = min(MAX_NUMEL, hi) if max_numel is None else int(max_numel)
        bounds = cls(lo, hi, numel, MAX_DIM if max_dim is None else int(max_dim))
        bounds.validate()
        return bounds

    def validate(self) -> None:
        if self.min_flops < 0:
            raise ConfigError(f"--min-flops must be >= 0, got {self.min_flops}")
        if self.max_flops < 1:
            raise ConfigError(f"--max-flops must be >= 1, got {self.max_flops}")
        if self.min_flops > self.max_flops:
            raise ConfigError(f"--min-flops ({self.min_flops}) is larger than --max-flops ({self.max_flops})")
        if self.max_numel < 1 or self.max_dim < 1:
            raise ConfigError("tensor size bounds must be >= 1")


@dataclass(frozen=True)
class Knobs:
    """How the DAG is wired (probabilities per operator)."""

    #: start a new branch instead of consuming the newest result (joined by a later operator)
    branch: float = 0.2
    #: consume one more pending result when the operator has room
    merge: float = 0.3
    #: feed a free input slot from an existing tensor (a skip connection) instead of a new input
    reuse: float = 0.25
    #: wiring/solving attempts per operator sequence before drawing a new sequence
    attempts: int = 12
