"""Recipes: everything a training run needs besides the command's own options.

- `tiny`: a small model from scratch (tokenizer trained on the synthetic corpus), SFT on
  verified 1-operator programs, then DRPO through the 1/2/5-operator curriculum. Runs on one GPU
  in minutes and on a CPU for a few steps (tests).
- `qwen2.5-coder-7b`: the paper's setup (SFT lr 2e-6, batch 64, 10 epochs; RL lr 1e-6, 8
  rollouts per prompt, lambda 0.1, tau 5, beta 100), for `accelerate launch` with DeepSpeed
  ZeRO-3 (`training/configs/zero3.yaml`) and vLLM-served rollouts through TRL. `--dry-run`
  builds a reduced model from the 7B's configuration and takes one step, anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

CONFIGS = Path(__file__).resolve().parent / "configs"


@dataclass(frozen=True)
class ModelSpec:
    kind: str  # "tiny": built from scratch; "pretrained": a checkpoint (path or hub id)
    source: str = ""  # pretrained: where it is
    hidden: int = 128
    layers: int = 2
    heads: int = 4
    vocab: int = 2048
    # the full-size architecture a dry run reduces (pretrained recipes)
    architecture: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SFTSettings:
    lr: float
    batch: int  # per device
    grad_accum: int = 1
    epochs: float = 1.0
    max_length: int = 4096
    programs: int = 200  # 1-operator programs to teach
    heldout: int = 20
    warmup: float = 0.0  # share of the steps with a linear warm-up
    # the teacher (built-in policy + search) per program: every check quick (timed against eager
    # only); a few candidates, not the editor's full search
    teacher_budget_s: float = 60.0
    teacher_candidates: int = 4
    teaching_s: float | None = None  # all programs together: those not started by then are left out


@dataclass(frozen=True)
class RLSettings:
    lr: float
    rollouts: int  # per prompt
    prompts_per_step: int = 2
    max_completion: int = 1024
    temperature: float = 1.0
    lam: float = 0.1
    tau: float = 5.0
    beta: float = 100.0
    kl_delta: float = 0.01
    stages: tuple[int, ...] = (1, 2, 5)  # operators per program, by stage
    programs_per_stage: int = 200
    heldout_per_stage: int = 16
    threshold: float = 0.5  # held-out pass@1 that moves the curriculum on
    eval_every: int = 20
    steps: int = 200  # optimiser steps unless --max-steps says otherwise
    save_every: int = 50  # steps between trainer checkpoints (what --resume goes on from)
    # a rollout's verification step (load, one trial) may take this long: the rewards of a step wait
    # for its slowest rollout (one stuck candidate held a tiny-recipe step for 166 s at the default 120 s)
    verify_timeout_s: float = 60.0
    # ... and its load, which compiles every kernel of it ahead (the verifier's default allows 900 s,
    # for whole networks): one rollout whose kernels took 123 s to compile held a whole step that
    # long (session 16; the earlier sessions' 27-265 s waits). A one-operator program's kernels
    # compile in seconds; a rollout that needs more is wrong anyway
    verify_load_timeout_s: float = 45.0
    use_vllm: bool = False
    # GRPO (the ablation) sums its rewards: correctness + weight * log(t_eager / t_triton). At weight
    # 1 a correct rollout slower than eager by e (these small programs run at ~0.4x) scores below a
    # wrong one, and GRPO un-learned correctness within 20 steps (session 15); at 0.1 a correct
    # rollout outranks every wrong one unless it is 20,000x slower than eager
    grpo_speed_weight: float = 0.1


@dataclass(frozen=True)
class DataSettings:
    seed: int = 0
    min_flops: int = 1_000
    max_flops: int = 2_000_000
    max_numel: int = 65_536
    max_dim: int = 256


@dataclass(frozen=True)
class Recipe:
    name: str
    model: ModelSpec
    sft: SFTSettings
    rl: RLSettings
    data: DataSettings = DataSettings()
    accelerate_config: Path | None = None  # for `accelerate launch` on many GPUs

    def for_tests(self) -> "Recipe":
        """The same recipe at a size a CPU runs in seconds."""
        return replace(
            self,
            model=replace(self.model, hidden=32, layers=1, heads=2, vocab=512),
            sft=replace(self.sft, batch=2, programs=4, heldout=2, max_length=2048),
            rl=replace(self.rl, rollouts=2, prompts_per_step=1, max_completion=48, programs_per_stage=2,
                       heldout_per_stage=1, eval_every=1, stages=(1, 2), steps=2),
            data=replace(self.data, max_flops=20_000, max_numel=1_024, max_dim=32),
        )


# sized for one GPU in under half an hour (docs/benchmarks.md): ~6M parameters. Answers are ~560
# tokens (median), 2,200 at most; rollouts come from training/sampling.py, fast enough for a few
# hundred RL steps across resumed runs (`--time-limit`, `--resume`)
TINY = Recipe(
    name="tiny",
    model=ModelSpec("tiny", hidden=256, layers=6, heads=4, vocab=4096),
    # SFT batch 32 (was 16): a step took 0.2-0.26 s at 16 rows (session 15) and 0.34 s at 32 on an
    # H200 (session 16), about 1.4x the rows a second (3,558 pairs at 32 reached 58% held-out on 200
    # programs, in two schedules: docs/benchmarks.md)
    sft=SFTSettings(lr=1e-3, batch=32, epochs=10, max_length=4096, programs=3000, heldout=32, warmup=0.05,
                    teacher_candidates=1, teaching_s=450.0),
    # RL: at lr 5e-5 (session 15) DRPO's held-out pass@1 fell from 53% to 31-44% within 70 steps;
    # at 2e-5 with 2 prompts a step it ended 3-15 points lower in 25-92 steps, all four runs (within
    # the +-17 points 32 programs tell apart). Adam's step does not shrink with the gradient's
    # scale, so a gradient from 16 rollouts, mostly noise, still moves every weight; greedy decoding
    # of 600-token answers is fragile to that drift. Now 4 prompts a step (32 rollouts behind each
    # step, so about half the steps in the same time) at 1e-5; see docs/benchmarks.md for the result
    rl=RLSettings(lr=1e-5, rollouts=8, prompts_per_step=4, max_completion=1536, temperature=0.8,
                  programs_per_stage=200, heldout_per_stage=32, eval_every=20, steps=400, save_every=50,
                  verify_timeout_s=30.0),
)

QWEN_7B = Recipe(
    name="qwen2.5-coder-7b",
    model=ModelSpec("pretrained", source="Qwen/Qwen2.5-Coder-7B-Instruct", architecture={
        "vocab_size": 152064, "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
        "num_attention_heads": 28, "num_key_value_heads": 4, "max_position_embeddings": 32768,
        "rope_theta": 1_000_000.0, "tie_word_embeddings": False}),
    # the paper's global batch of 64: 8 GPUs x 8 per device
    sft=SFTSettings(lr=2e-6, batch=8, grad_accum=1, epochs=10, max_length=8192, programs=2026, heldout=100),
    rl=RLSettings(lr=1e-6, rollouts=8, prompts_per_step=8, max_completion=4096, temperature=1.0, lam=0.1,
                  tau=5.0, beta=100.0, programs_per_stage=20_000, heldout_per_stage=256, eval_every=50,
                  steps=12_500, use_vllm=True),
    data=DataSettings(max_flops=50_000_000, max_numel=4_194_304, max_dim=4096),
    accelerate_config=CONFIGS / "zero3.yaml",
)

RECIPES = {r.name: r for r in (TINY, QWEN_7B)}


def get(name: str) -> Recipe:
    try:
        return RECIPES[name]
    except KeyError:
        raise ValueError(f"unknown recipe {name!r}; choose from: {', '.join(RECIPES)}") from None
