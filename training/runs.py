"""The three runs behind `drtriton-train sft | drpo | eval`, composed from the pieces of this
package (data, model building, trainers, rewards, curriculum, metrics). Each writes into its
output folder: `data/` (the JSONL it trained on), `model/` (the checkpoint), `metrics.jsonl`,
`metrics.svg` and `summary.json`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from drtriton.search import SearchConfig
from drtriton.verify import Verifier, VerifyConfig

from .data import Programs, read_jsonl, rl_prompts, sft_pairs, split_heldout, write_jsonl
from .recipes import Recipe
from .rewards import VerifierRewards
from .sampling import complete_chats
from .synth.config import Bounds

try:
    from transformers import TrainerCallback
except ImportError:  # pragma: no cover
    TrainerCallback = object  # type: ignore[misc,assignment]

Say = Callable[[str], None]


@dataclass
class RunOptions:
    out: Path
    device: str = "auto"
    max_steps: int = -1
    init: Path | None = None
    dry_run: bool = False  # a reduced model from the recipe's configuration, one step (or --max-steps)
    verifier_workers: int = 2
    verifier_gpus: str | None = None  # e.g. "1": rewards verified on another GPU than training
    time_limit_s: float | None = None  # training stops after the step that passes it (then saves)
    teacher_pools: int = 1  # SFT data: verifiers (each with its own reference worker) teaching at once
    resume: bool = False  # RL: go on from the output folder's last checkpoint (optimiser, step, curriculum)
    # verifier workers on this machine, every teacher pool's and side-by-side run's together (None: this
    # run's): each compiles kernels with its share of the cores
    host_workers: int | None = None


def program_seed(purpose: str, seed: int, index: int = 0) -> int:
    """The synthesis seed of one set of programs: SFT teaching, an RL stage, an evaluation, each
    from its own stream (with plain offsets, `teach --seed 1` drew RL seed 0's first stage)."""
    digest = hashlib.sha256(f"{purpose}:{seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


def _bounds(recipe: Recipe) -> Bounds:
    d = recipe.data
    return Bounds.make(d.min_flops, d.max_flops, d.max_numel, d.max_dim)


def _device(device: str) -> str:
    import torch

    return ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device


def _rank() -> tuple[int, int, int]:
    """(rank, local rank, world size) under `accelerate launch` / torchrun; (0, 0, 1) alone."""
    return (int(os.environ.get("RANK", 0)), int(os.environ.get("LOCAL_RANK", 0)),
            int(os.environ.get("WORLD_SIZE", 1)))


def _main_process() -> bool:
    return _rank()[0] == 0


def _verifier(options: RunOptions, **settings) -> Verifier:
    gpus = options.verifier_gpus
    _, local, world = _rank()
    if gpus is None and world > 1 and _device(options.device) == "cuda":
        # data parallel: each process verifies on its own GPU, not all of them on the first
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        ids = visible.split(",") if visible else [str(i) for i in range(world)]
        gpus = ids[local % len(ids)]
    host = options.host_workers or options.verifier_workers * options.teacher_pools
    return Verifier(VerifyConfig(device=_device(options.device), workers=options.verifier_workers, gpus=gpus,
                                 host_workers=host, **settings))


class TimeLimit(TrainerCallback):
    """Ends training after the first step that finishes past `seconds` of training; with
    `checkpoint`, saves a trainer checkpoint there (what `--resume` goes on from)."""

    def __init__(self, seconds: float, checkpoint: bool = False):
        self.seconds = seconds
        self.checkpoint = checkpoint
        self.started = time.monotonic()

    def on_train_begin(self, args, state, control, **kwargs):
        self.started = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        if time.monotonic() - self.started >= self.seconds:
            control.should_training_stop = True
            control.should_save = control.should_save or self.checkpoint
        return control


def _callbacks(options: RunOptions, *callbacks, checkpoint: bool = False) -> list:
    return [*callbacks, *([TimeLimit(options.time_limit_s, checkpoint)] if options.time_limit_s else [])]


# -- models -------------------------------------------------------------------------------------


def load_model(path: Path, device: str):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True).to(device)
    return model, tokenizer


def base_model(recipe: Recipe, options: RunOptions, corpus: list[str], say: Say):
    """The model SFT starts from: `--init`, the tiny model built on `corpus`, a reduced copy of
    the recipe's architecture (dry run), or the recipe's pretrained checkpoint."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config

    from .tiny import build_tokenizer, build_tiny_model, corpus_from_package

    device = _device(options.device)
    if options.init:
        return load_model(options.init, device)
    spec = recipe.model
    if spec.kind == "tiny":
        path = build_tiny_model(options.out / "base", corpus + corpus_from_package(200_000), vocab_size=spec.vocab,
                                hidden=spec.hidden, layers=spec.layers, heads=spec.heads)
        say(f"built the tiny model ({spec.layers} layers, hidden {spec.hidden}) and its tokenizer in {path}")
        return load_model(path, device)
    if options.dry_run:  # the 7B's shape, scaled down: the same code path, no download
        import torch

        tokenizer = build_tokenizer(corpus + corpus_from_package(100_000), vocab_size=1024)
        arch = dict(spec.architecture)
        arch.update(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2,
                    eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(Qwen2Config(**arch))
        say(f"dry run: {spec.source}'s architecture reduced to {model.num_parameters():,} parameters")
        # saved and loaded back like any checkpoint: TRL builds DRPO's reference model from the path
        return load_model(_save(model, tokenizer, options.out / "base"), device)
    say(f"loading {spec.source}")
    return (AutoModelForCausalLM.from_pretrained(spec.source).to(device), AutoTokenizer.from_pretrained(spec.source))


def parallelism(trainer) -> str:
    """How a trainer runs: its processes, accelerate's distributed type and, under DeepSpeed,
    the ZeRO stage (what a run under `accelerate launch --config_file zero3.yaml` shows)."""
    acc = trainer.accelerator
    plugin = getattr(acc.state, "deepspeed_plugin", None)
    zero = f", ZeRO stage {plugin.zero_stage}" if plugin is not None else ""
    n = acc.num_processes
    return f"{n} process{'es' if n > 1 else ''}, {acc.distributed_type.value}{zero}"


def _dry_steps(options: RunOptions) -> int:
    """A dry run takes one step, or `--max-steps` of them (ZeRO-3 shown over several steps)."""
    return options.max_steps if options.max_steps > 0 else 1


def _save(model, tokenizer, path: Path) -> Path:
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _finish(out: Path, kind: str, summary: dict, keys: list[str]) -> dict:
    if not _main_process():  # data parallel: one process writes
        return summary
    from .metrics import plot, read

    metrics = out / "metrics.jsonl"
    if metrics.is_file():
        plot(read(metrics), keys, out / "metrics.svg", f"drtriton-train {kind}")
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return summary


# -- SFT ----------------------------------------------------------------------------------------


def teach(recipe: Recipe, options: RunOptions, say: Say = print, budget_s: float | None = None) -> list[dict]:
    """The SFT data: 1-operator programs taught by the built-in policy, every pair verified,
    in `out/data/sft.jsonl` (and the held-out programs in `heldout.jsonl`). Runs anywhere: on a
    CPU the kernels run in the Triton interpreter, so a machine without a GPU can teach while the
    GPU trains. Each pair is also appended to `sft.partial.jsonl` as it is verified, so an
    interrupted run keeps what it taught; a folder with pairs gets more (see below).
    `budget_s` (default the recipe's): programs not started by then are left out."""
    data = options.out / "data"
    n = recipe.sft.programs + recipe.sft.heldout
    say(f"synthesising {n} 1-operator programs")
    programs = Programs.synthesize(n, [1], program_seed("sft", recipe.data.seed), _bounds(recipe))
    train_programs, heldout = split_heldout(programs.records, recipe.sft.heldout)
    # a folder that has pairs already (taught elsewhere, or with another --seed) gets more: its
    # held-out programs stay held out, and no program is taught twice
    earlier = read_jsonl(data / "sft.jsonl") if (data / "sft.jsonl").is_file() else []
    partial = data / "sft.partial.jsonl"
    if partial.is_file():  # pairs an interrupted run verified
        known = {p["id"] for p in earlier}
        earlier += [p for p in read_jsonl(partial) if p["id"] not in known]
    if (data / "heldout.jsonl").is_file():
        heldout = read_jsonl(data / "heldout.jsonl")
    held = {p["id"] for p in heldout}
    earlier = [p for p in earlier if p["id"] not in held]  # never train on a held-out program
    skip = {p["id"] for p in earlier} | held
    train_programs = [p for p in train_programs if p["id"] not in skip]
    write_jsonl(data / "heldout.jsonl", heldout)
    device = _device(options.device)
    say(f"teaching them with the built-in policy; every pair is verified ({device}, "
        f"{options.verifier_workers * options.teacher_pools} at a time)")
    teacher = SearchConfig(budget_s=recipe.sft.teacher_budget_s, max_candidates=recipe.sft.teacher_candidates,
                           quick=True)
    # in the interpreter timings mean nothing (one timed call instead of a quick check's 30), and
    # a program whose trial takes over 30 s is left for a GPU to teach
    settings = {"timing_trials": 1, "timing_warmup": 1, "timeout_s": 30.0} if device == "cpu" else {}
    taught = time.monotonic()
    write_jsonl(data / "sft.jsonl", earlier)  # what the partial file held is safe before it restarts
    partial.write_text("")
    with contextlib.ExitStack() as stack, open(partial, "a") as sink:
        verifiers = [stack.enter_context(_verifier(options, **settings)) for _ in range(options.teacher_pools)]

        def keep(pair: dict) -> None:
            sink.write(json.dumps(pair) + "\n")
            sink.flush()

        pairs = sft_pairs(train_programs, verifiers, search=teacher,
                          workers=options.verifier_workers * options.teacher_pools,
                          budget_s=budget_s or recipe.sft.teaching_s, on_pair=keep,
                          progress=lambda i, n, ok: say(f"  pair {i}/{n}: {'verified' if ok else 'no correct module'}"))
    say(f"{len(pairs)} verified pairs of {len(train_programs)} programs in {time.monotonic() - taught:.0f} s"
        + (f"; {len(earlier)} pairs were there already" if earlier else ""))
    pairs = earlier + pairs
    write_jsonl(data / "sft.jsonl", pairs)
    partial.unlink()
    return pairs


def run_sft(recipe: Recipe, options: RunOptions, say: Say = print) -> dict:
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from .metrics import MetricsLog

    started = time.monotonic()
    out = options.out
    data = out / "data"
    if (data / "sft.jsonl").is_file():
        pairs = read_jsonl(data / "sft.jsonl")
        say(f"reusing {len(pairs)} SFT pairs from {data / 'sft.jsonl'}")
    else:
        pairs = teach(recipe, options, say)
    if not pairs:
        raise RuntimeError("no verified SFT pair: nothing to train on")
    corpus = [m["content"] for p in pairs for m in p["messages"]]
    model, tokenizer = base_model(recipe, options, corpus, say)
    device = _device(options.device)
    s = recipe.sft
    args = SFTConfig(output_dir=str(out / "trainer"), learning_rate=s.lr, per_device_train_batch_size=s.batch,
                     gradient_accumulation_steps=s.grad_accum, num_train_epochs=s.epochs, warmup_steps=s.warmup,
                     max_steps=_dry_steps(options) if options.dry_run else options.max_steps, max_length=s.max_length,
                     logging_steps=1, save_strategy="no", report_to=[], use_cpu=device == "cpu",
                     bf16=device == "cuda" and recipe.model.kind == "pretrained",
                     gradient_checkpointing=recipe.model.kind == "pretrained" and not options.dry_run,
                     seed=recipe.data.seed, dataset_num_proc=None)
    # prompt/completion rows: the loss is on the answer only, not on the instruction and the worked
    # example every prompt repeats
    rows = [{"prompt": p["messages"][:-1], "completion": p["messages"][-1:]} for p in pairs]
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
                         processing_class=tokenizer, callbacks=_callbacks(options, MetricsLog(out / "metrics.jsonl")))
    say(f"SFT on {len(pairs)} pairs ({parallelism(trainer)})")
    trained = time.monotonic()
    result = trainer.train()
    train_s = time.monotonic() - trained
    path = _save(trainer.model, tokenizer, out / "model")
    say(f"SFT done: {result.global_step} steps in {train_s:.0f} s, loss {result.training_loss:.4f}; model in {path}")
    heldout_rate = None
    if (data / "heldout.jsonl").is_file() and not options.dry_run:  # programs SFT never saw
        rows = rl_prompts(read_jsonl(data / "heldout.jsonl"))
        say(f"held-out pass@1 on {len(rows)} programs (greedy, verified)")
        with _verifier(options) as verifier:
            rewards = VerifierRewards(verifier)
            heldout_rate = pass_at_1(trainer.model, tokenizer, rewards, rows, recipe.rl.max_completion)
            rewards.close()
        say(f"held-out pass@1 after SFT: {heldout_rate:.0%}")
    summary = {"recipe": recipe.name, "pairs": len(pairs), "steps": result.global_step,
               "train_loss": result.training_loss, "train_s": round(train_s, 1), "heldout_pass1": heldout_rate,
               "model": str(path), "seconds": round(time.monotonic() - started, 1), "settings": asdict(recipe.sft),
               "parallelism": parallelism(trainer)}
    return _finish(out, "sft", summary, ["loss", "grad_norm", "learning_rate"])


# -- DRPO / GRPO --------------------------------------------------------------------------------


def pass_at_1(model, tokenizer, rewards, rows: list[dict], max_new_tokens: int) -> float:
    """Greedy answers to held-out prompts, verified: the share that is correct."""
    if not rows:
        return 0.0
    completions = complete_chats(model, tokenizer, [r["prompt"] for r in rows], max_new_tokens)
    verdicts = rewards.verdicts(completions, [r["problem_source"] for r in rows], [r["problem_class"] for r in rows])
    return sum(v.correct for v in verdicts) / len(verdicts)


def rl_data(recipe: Recipe, out: Path, say: Say) -> tuple[list[list[dict]], list[list[dict]]]:
    data = out / "data"
    stages, heldout = [], []
    for index, k in enumerate(recipe.rl.stages):
        train_path, held_path = data / f"stage{index}_k{k}.jsonl", data / f"heldout{index}_k{k}.jsonl"
        if train_path.is_file() and held_path.is_file():
            stages.append(read_jsonl(train_path))
            heldout.append(read_jsonl(held_path))
            continue
        n = recipe.rl.programs_per_stage + recipe.rl.heldout_per_stage
        say(f"synthesising {n} programs of {k} operators (stage {index + 1})")
        programs = Programs.synthesize(n, [k], program_seed("rl", recipe.data.seed, index), _bounds(recipe))
        train, held = split_heldout(rl_prompts(programs.records), recipe.rl.heldout_per_stage)
        if _main_process():  # every process synthesises the same programs (same seed); one writes
            write_jsonl(train_path, train)
            write_jsonl(held_path, held)
        stages.append(train)
        heldout.append(held)
    return stages, heldout


def run_rl(recipe: Recipe, options: RunOptions, algorithm: str = "drpo", say: Say = print) -> dict:
    from .curriculum import CurriculumCallback, CurriculumDataset
    from .drpo import DRPOConfig, DRPOTrainer
    from .metrics import MetricsLog

    started = time.monotonic()
    out = options.out
    if options.init is None and not options.dry_run:
        raise ValueError("DRPO starts from an SFT checkpoint: give --init DIR (an `sft` run's model/)")
    stages, heldout = rl_data(recipe, out, say)
    device = _device(options.device)
    if options.init is not None:
        model, tokenizer = load_model(options.init, device)
    else:
        model, tokenizer = base_model(recipe, options, [r["problem_source"] for s in stages for r in s], say)
    r = recipe.rl
    dataset = CurriculumDataset(stages, seed=recipe.data.seed)
    # complete checkpoints (a save cut short has no trainer_state.json), newest last
    checkpoints = sorted((p for p in (out / "trainer").glob("checkpoint-*") if (p / "trainer_state.json").is_file()),
                         key=lambda p: int(p.name.split("-")[-1]))
    resume_from = str(checkpoints[-1]) if options.resume and checkpoints else None
    if options.resume and not resume_from:
        say(f"--resume: no checkpoint in {out / 'trainer'}; starting from step 0")
    if checkpoints and not options.resume:
        raise ValueError(f"{out / 'trainer'} holds checkpoints of an earlier run: add --resume to go on from "
                         f"{checkpoints[-1].name}, or give another --out")
    args = DRPOConfig(
        output_dir=str(out / "trainer"), algorithm=algorithm, learning_rate=r.lr,
        per_device_train_batch_size=r.rollouts * r.prompts_per_step, num_generations=r.rollouts,
        max_completion_length=r.max_completion, temperature=r.temperature, lam=r.lam, tau=r.tau,
        beta=r.beta if algorithm == "drpo" else 0.0, kl_delta=r.kl_delta,
        loss_type="grpo" if algorithm == "grpo" else "dapo",
        # DRPO reads the two rewards apart; GRPO's advantage comes from their weighted sum
        reward_weights=[1.0, r.grpo_speed_weight] if algorithm == "grpo" else None,
        max_steps=_dry_steps(options) if options.dry_run else (options.max_steps if options.max_steps > 0 else r.steps),
        logging_steps=1,
        # a checkpoint every `save_every` steps and where a time limit stops the run: `--resume` goes on
        save_strategy="no" if options.dry_run else "steps", save_steps=r.save_every, save_total_limit=1,
        report_to=[], use_cpu=device == "cpu", bf16=device == "cuda" and recipe.model.kind == "pretrained",
        gradient_checkpointing=False, use_vllm=r.use_vllm and not options.dry_run, vllm_mode="server",
        # no shuffle: the curriculum's stream is shuffled already, and TRL's buffered shuffle of an
        # iterable dataset would hold 1,000 prompts of the old stage after the curriculum moves on
        shuffle_dataset=False, seed=recipe.data.seed, remove_unused_columns=False)
    with _verifier(options, timeout_s=r.verify_timeout_s, load_timeout_s=r.verify_load_timeout_s,
                   retune_before_timing=False) as verifier:
        rewards = VerifierRewards(verifier)
        # the held-out checks have their own: the step metrics (verified, the slowest) count rollouts only
        heldout_rewards = VerifierRewards(verifier)
        metrics = MetricsLog(out / "metrics.jsonl", extra=lambda: {
            "stage": dataset.stage, "stage_k": recipe.rl.stages[dataset.stage],
            "verification_total_s": round(rewards.seconds, 2), "verified": rewards.verified,
            "verified_early": rewards.early_used,
            **{f"verify/slowest/{k}": v for k, v in rewards.slowest.items()}})
        trainer = DRPOTrainer(model=model, reward_funcs=rewards.functions, args=args,
                              train_dataset=dataset.as_iterable(), processing_class=tokenizer,
                              callbacks=_callbacks(options, metrics, checkpoint=not options.dry_run))
        trainer.verification_clock = lambda: rewards.seconds
        trainer.early_verify = lambda text, row: rewards.early(text, row["problem_source"], row["problem_class"])
        if verifier.cuda and options.verifier_gpus is None:  # the verifier times on training's GPU
            trainer.gpu_shared = verifier.gpu.shared
        history = out / "curriculum.json"

        def log(record: dict) -> None:
            metrics.write(record)
            if _main_process():
                history.write_text(json.dumps(curriculum.history, indent=1) + "\n")

        curriculum = CurriculumCallback(
            dataset, heldout, lambda rows: pass_at_1(trainer.model, tokenizer, heldout_rewards, rows, r.max_completion),
            threshold=r.threshold, every=r.eval_every, log=log)
        if resume_from and history.is_file():  # the checks up to the checkpoint's step (a crash may have come later)
            step = json.loads((Path(resume_from) / "trainer_state.json").read_text())["global_step"]
            curriculum.restore([c for c in json.loads(history.read_text()) if c["step"] <= step])
        trainer.add_callback(curriculum)
        say(f"{algorithm.upper()} from {options.init or 'a reduced model (dry run)'}"
            + (f", resuming {resume_from} at stage {dataset.stage + 1}" if resume_from else "")
            + f": stages k={list(r.stages)}, {r.rollouts} rollouts per prompt ({parallelism(trainer)})")
        result = trainer.train(resume_from_checkpoint=resume_from)
        if not curriculum.history or curriculum.history[-1]["step"] != result.global_step:
            curriculum.check(result.global_step, advance=False)  # the held-out rate at the end: a measurement
        path = out / "model"
        if _main_process():
            _save(trainer.model, tokenizer, path)
        summary = {"recipe": recipe.name, "algorithm": algorithm, "init": str(options.init), "steps": result.global_step,
                   "final_stage": dataset.stage, "curriculum": curriculum.history, "model": str(path),
                   "verified_completions": rewards.verified, "verified_early": rewards.early_used,
                   "verification_s": round(rewards.seconds, 1),
                   "seconds": round(time.monotonic() - started, 1), "settings": asdict(r),
                   "parallelism": parallelism(trainer)}
        rewards.close()
        heldout_rewards.close()
    say(f"{algorithm.upper()} done: {result.global_step} steps; held-out pass@1 "
        f"{curriculum.history[-1]['heldout_pass1']:.0%} at stage {curriculum.history[-1]['stage'] + 1}")
    return _finish(out, algorithm, summary, ["loss", "rewards/correctness/mean", "rewards/speed/mean", "kl",
                                             "time/generation_s", "time/verification_s", "time/update_s", "stage",
                                             "prompts/k"])


# -- evaluation ---------------------------------------------------------------------------------


def _trained_on(checkpoint: Path) -> set[str]:
    """Ids of the programs in the data of the run that wrote `checkpoint` (RUN/model beside
    RUN/data) and of the run it started from (its summary's `--init`, and so on back)."""
    ids: set[str] = set()
    run, seen_runs = Path(checkpoint).parent, set()
    while run not in seen_runs and (run / "data").is_dir():
        seen_runs.add(run)
        for path in (run / "data").glob("*.jsonl"):
            if path.name.startswith("heldout"):
                continue  # held out from that run's training: fair to evaluate on
            ids |= {r["id"] for r in read_jsonl(path) if "id" in r}
        summary = run / "summary.json"
        init = json.loads(summary.read_text()).get("init") if summary.is_file() else None
        if not init:
            break
        run = Path(init).parent
    return ids


def run_eval(recipe: Recipe, options: RunOptions, kernelbench: Path | None = None, levels: tuple[int, ...] = (1, 2),
             limit: int | None = None, say: Say = print, heldout: int | None = None,
             ks: tuple[int, ...] | None = None, pass_k: int = 1) -> dict:
    """A checkpoint alone, in one round, on fresh held-out synthetic programs by k (`heldout` of
    each, default the recipe's) and on KernelBench. Every answer is generated first, in batches
    (greedy: pass@1; with `pass_k` > 1 also `pass_k` samples a problem at the recipe's RL
    temperature: pass@k, any of them correct), then verified in the verifier's pool: correct and
    faster than eager, and on KernelBench (full checks) faster than torch.compile; synthetic
    programs get quick checks, timed against eager only, as the RL reward is. Every rate with
    its 95% Wilson interval."""
    from drtriton.bench import BenchEntry, summarize, write_report
    from drtriton.problem import from_source, load_kernelbench
    from drtriton.prompting import build_messages

    from .metrics import wilson

    if options.init is None:
        raise ValueError("eval needs --init DIR: the checkpoint to evaluate")
    started = time.monotonic()
    device = _device(options.device)
    groups: dict[str, list] = {}
    seen = _trained_on(options.init)
    for k in ks or recipe.rl.stages:  # a seed stream of its own, and nothing the checkpoint was trained on
        programs = Programs.synthesize(heldout or recipe.rl.heldout_per_stage, [k],
                                       program_seed("eval", recipe.data.seed, k), _bounds(recipe))
        fresh = [p for p in programs.records if p["id"] not in seen]
        if len(fresh) < len(programs.records):
            say(f"synthetic k={k}: {len(programs.records) - len(fresh)} programs left out (in the training data)")
        groups[f"synthetic k={k}"] = [from_source(p["code"], "Model", name=p["id"]) for p in fresh]
    if kernelbench is not None:
        for level in levels:
            problems = load_kernelbench(kernelbench / f"level{level}.jsonl")
            groups[f"KernelBench level {level}"] = problems[:limit] if limit else problems
    model, tokenizer = load_model(options.init, device)
    max_new = recipe.rl.max_completion

    def interval(successes: int, n: int) -> dict:
        return dict(zip(("low", "high"), wilson(successes, n)))

    results = {}
    with _verifier(options) as verifier:
        for name, problems in groups.items():
            quick = name.startswith("synthetic")
            rewards = VerifierRewards(verifier, quick=quick)
            chats = [build_messages(p.source, p.candidate_class, "strict") for p in problems]
            sources, classes = [p.source for p in problems], [p.class_name for p in problems]
            generated = time.monotonic()
            greedy = complete_chats(model, tokenizer, chats, max_new)
            sampled = complete_chats(model, tokenizer, [c for c in chats for _ in range(pass_k)], max_new,
                                     recipe.rl.temperature) if pass_k > 1 else []
            generation_s = time.monotonic() - generated
            say(f"{name}: {len(greedy) + len(sampled)} answers generated in {generation_s:.0f} s; verifying")
            verdicts = rewards.verdicts(greedy, sources, classes)
            any_of_k = [False] * len(problems)
            if sampled:
                more = rewards.verdicts(sampled, [s for s in sources for _ in range(pass_k)],
                                        [c for c in classes for _ in range(pass_k)])
                any_of_k = [any(v.correct for v in more[i * pass_k:(i + 1) * pass_k]) for i in range(len(problems))]
            rewards.close()
            entries = []
            for i, (problem, verdict) in enumerate(zip(problems, verdicts)):
                entries.append(BenchEntry(problem, None, verdict, plan="model"))
                line = verdict.summary + (f"; pass@{pass_k}: {'yes' if any_of_k[i] else 'no'}" if sampled else "")
                say(f"  {name} [{i + 1}/{len(problems)}] {problem.name}: {line}")
            summary = summarize(entries)
            folder = options.out / name.replace(" ", "_").replace("=", "")
            write_report(entries, summary, folder, f"{options.init} on {name}")
            # what the model wrote (the greedy answers), to read beside the verdicts
            write_jsonl(folder / "answers.jsonl", [
                {"problem": p.name, "correct": v.correct, "status": v.status, "answer": a,
                 **({f"pass@{pass_k}": hit} if sampled else {})}
                for p, a, v, hit in zip(problems, greedy, verdicts, any_of_k)])
            n = summary["problems"]
            rates = [("correct", "eager", "0.0"), ("faster_than_eager", "eager", "1.0")]
            if not quick:
                rates.append(("faster_than_compile", "compile", "1.0"))
            counts = {key: round(summary[f"fast_p_{base}"][p] * n) for key, base, p in rates}
            if sampled:
                counts[f"pass@{pass_k}"] = sum(any_of_k)
            results[name] = {"problems": n, **{key: c / n if n else 0.0 for key, c in counts.items()},
                             "intervals": {key: interval(c, n) for key, c in counts.items()},
                             "generation_s": round(generation_s, 1)}
            ci = results[name]["intervals"]["correct"]
            say(f"{name}: correct {results[name]['correct']:.0%} (95% {ci['low']:.0%}-{ci['high']:.0%}), faster "
                f"than eager {results[name]['faster_than_eager']:.0%}"
                + (f", than torch.compile {results[name]['faster_than_compile']:.0%}" if not quick else "")
                + (f", pass@{pass_k} {results[name][f'pass@{pass_k}']:.0%}" if sampled else ""))
    summary = {"checkpoint": str(options.init), "device": device, "results": results,
               "seconds": round(time.monotonic() - started, 1)}
    return _finish(options.out, "eval", summary, [])
