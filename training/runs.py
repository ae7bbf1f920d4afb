"""The three runs behind `drtriton-train sft | drpo | eval`, composed from the pieces of this
package (data, model building, trainers, rewards, curriculum, metrics). Each writes into its
output folder: `data/` (the JSONL it trained on), `model/` (the checkpoint), `metrics.jsonl`,
`metrics.svg` and `summary.json`.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from drtriton.verify import Verifier, VerifyConfig

from .data import Programs, read_jsonl, rl_prompts, sft_pairs, split_heldout, write_jsonl
from .recipes import Recipe
from .synth.config import Bounds

Say = Callable[[str], None]


@dataclass
class RunOptions:
    out: Path
    device: str = "auto"
    max_steps: int = -1
    init: Path | None = None
    dry_run: bool = False  # a reduced model from the recipe's configuration, one step
    verifier_workers: int = 2
    verifier_gpus: str | None = None  # e.g. "1": rewards verified on another GPU than training


def _bounds(recipe: Recipe) -> Bounds:
    d = recipe.data
    return Bounds.make(d.min_flops, d.max_flops, d.max_numel, d.max_dim)


def _device(device: str) -> str:
    import torch

    return ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device


def _verifier(options: RunOptions) -> Verifier:
    return Verifier(VerifyConfig(device=_device(options.device), workers=options.verifier_workers,
                                 gpus=options.verifier_gpus))


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


def _save(model, tokenizer, path: Path) -> Path:
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _finish(out: Path, kind: str, summary: dict, keys: list[str]) -> dict:
    from .metrics import plot, read

    metrics = out / "metrics.jsonl"
    if metrics.is_file():
        plot(read(metrics), keys, out / "metrics.svg", f"drtriton-train {kind}")
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return summary


# -- SFT ----------------------------------------------------------------------------------------


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
        n = recipe.sft.programs + recipe.sft.heldout
        say(f"synthesising {n} 1-operator programs")
        programs = Programs.synthesize(n, [1], recipe.data.seed, _bounds(recipe))
        train_programs, heldout = split_heldout(programs.records, recipe.sft.heldout)
        write_jsonl(data / "heldout.jsonl", heldout)
        say(f"teaching them with the built-in policy; every pair is verified ({_device(options.device)})")
        with _verifier(options) as verifier:
            pairs = sft_pairs(train_programs, verifier, budget_s=120,
                              progress=lambda i, n, ok: say(f"  pair {i}/{n}: {'verified' if ok else 'no correct module'}"))
        write_jsonl(data / "sft.jsonl", pairs)
    if not pairs:
        raise RuntimeError("no verified SFT pair: nothing to train on")
    corpus = [m["content"] for p in pairs for m in p["messages"]]
    model, tokenizer = base_model(recipe, options, corpus, say)
    device = _device(options.device)
    s = recipe.sft
    args = SFTConfig(output_dir=str(out / "trainer"), learning_rate=s.lr, per_device_train_batch_size=s.batch,
                     gradient_accumulation_steps=s.grad_accum, num_train_epochs=s.epochs,
                     max_steps=1 if options.dry_run else options.max_steps, max_length=s.max_length,
                     logging_steps=1, save_strategy="no", report_to=[], use_cpu=device == "cpu",
                     bf16=device == "cuda" and recipe.model.kind == "pretrained",
                     gradient_checkpointing=recipe.model.kind == "pretrained" and not options.dry_run,
                     seed=recipe.data.seed, dataset_num_proc=None)
    # prompt/completion rows: the loss is on the answer only, not on the instruction and the worked
    # example every prompt repeats
    rows = [{"prompt": p["messages"][:-1], "completion": p["messages"][-1:]} for p in pairs]
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
                         processing_class=tokenizer, callbacks=[MetricsLog(out / "metrics.jsonl")])
    say(f"SFT on {len(pairs)} pairs")
    result = trainer.train()
    path = _save(trainer.model, tokenizer, out / "model")
    summary = {"recipe": recipe.name, "pairs": len(pairs), "steps": result.global_step,
               "train_loss": result.training_loss, "model": str(path), "seconds": round(time.monotonic() - started, 1),
               "settings": asdict(recipe.sft)}
    say(f"SFT done: {result.global_step} steps, loss {result.training_loss:.4f}; model in {path}")
    return _finish(out, "sft", summary, ["loss", "grad_norm", "learning_rate"])


# -- DRPO / GRPO --------------------------------------------------------------------------------


def pass_at_1(model, tokenizer, rewards, rows: list[dict], max_new_tokens: int) -> float:
    """Greedy answers to held-out prompts, verified: the share that is correct."""
    import torch

    if not rows:
        return 0.0
    completions = []
    model.eval()
    with torch.no_grad():
        for row in rows:
            ids = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, return_tensors="pt",
                                                return_dict=True)["input_ids"].to(model.device)
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                                 do_sample=False, pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id)
            completions.append(tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True))
    model.train()
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
        programs = Programs.synthesize(n, [k], recipe.data.seed + 1 + index, _bounds(recipe))
        train, held = split_heldout(rl_prompts(programs.records), recipe.rl.heldout_per_stage)
        write_jsonl(train_path, train)
        write_jsonl(held_path, held)
        stages.append(train)
        heldout.append(held)
    return stages, heldout


def run_rl(recipe: Recipe, options: RunOptions, algorithm: str = "drpo", say: Say = print) -> dict:
    from .curriculum import CurriculumCallback, CurriculumDataset
    from .drpo import DRPOConfig, DRPOTrainer
    from .metrics import MetricsLog
    from .rewards import VerifierRewards

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
    args = DRPOConfig(
        output_dir=str(out / "trainer"), algorithm=algorithm, learning_rate=r.lr,
        per_device_train_batch_size=r.rollouts * r.prompts_per_step, num_generations=r.rollouts,
        max_completion_length=r.max_completion, temperature=r.temperature, lam=r.lam, tau=r.tau,
        beta=r.beta if algorithm == "drpo" else 0.0, kl_delta=r.kl_delta,
        loss_type="grpo" if algorithm == "grpo" else "dapo",
        max_steps=1 if options.dry_run else (options.max_steps if options.max_steps > 0 else r.steps), logging_steps=1,
        save_strategy="no", report_to=[], use_cpu=device == "cpu", bf16=device == "cuda" and recipe.model.kind == "pretrained",
        gradient_checkpointing=False, use_vllm=r.use_vllm and not options.dry_run, vllm_mode="server",
        # no shuffle: the curriculum's stream is shuffled already, and TRL's buffered shuffle of an
        # iterable dataset would hold 1,000 prompts of the old stage after the curriculum moves on
        shuffle_dataset=False, seed=recipe.data.seed, remove_unused_columns=False)
    with _verifier(options) as verifier:
        rewards = VerifierRewards(verifier)
        metrics = MetricsLog(out / "metrics.jsonl", extra=lambda: {
            "stage": dataset.stage, "stage_k": recipe.rl.stages[dataset.stage],
            "verification_total_s": round(rewards.seconds, 2), "verified": rewards.verified})
        trainer = DRPOTrainer(model=model, reward_funcs=rewards.functions, args=args,
                              train_dataset=dataset.as_iterable(), processing_class=tokenizer, callbacks=[metrics])
        trainer.verification_clock = lambda: rewards.seconds
        curriculum = CurriculumCallback(
            dataset, heldout, lambda rows: pass_at_1(trainer.model, tokenizer, rewards, rows, r.max_completion),
            threshold=r.threshold, every=r.eval_every, log=metrics.write)
        trainer.add_callback(curriculum)
        say(f"{algorithm.upper()} from {options.init or 'a reduced model (dry run)'}: stages k={list(r.stages)}, "
            f"{r.rollouts} rollouts per prompt")
        result = trainer.train()
        if not curriculum.history or curriculum.history[-1]["step"] != result.global_step:
            curriculum.check(result.global_step)  # the held-out rate at the end
        path = _save(trainer.model, tokenizer, out / "model")
        summary = {"recipe": recipe.name, "algorithm": algorithm, "steps": result.global_step,
                   "final_stage": dataset.stage, "curriculum": curriculum.history, "model": str(path),
                   "verified_completions": rewards.verified, "verification_s": round(rewards.seconds, 1),
                   "seconds": round(time.monotonic() - started, 1), "settings": asdict(r)}
        rewards.close()
    say(f"{algorithm.upper()} done: {result.global_step} steps; held-out pass@1 "
        f"{curriculum.history[-1]['heldout_pass1']:.0%} at stage {curriculum.history[-1]['stage'] + 1}")
    return _finish(out, algorithm, summary, ["loss", "rewards/correctness/mean", "rewards/speed/mean", "kl",
                                             "time/generation_s", "time/verification_s", "time/update_s", "stage",
                                             "prompts/k"])


# -- evaluation ---------------------------------------------------------------------------------


def run_eval(recipe: Recipe, options: RunOptions, kernelbench: Path | None = None, levels: tuple[int, ...] = (1, 2),
             limit: int | None = None, say: Say = print) -> dict:
    """A checkpoint's pass@1 through the real pipeline (the model alone, one round): on fresh
    held-out synthetic programs by k, and on KernelBench: correct, faster than eager, faster
    than torch.compile."""
    from drtriton.bench import BenchEntry, summarize, write_report
    from drtriton.policy.models import HFPolicy
    from drtriton.problem import from_source, load_kernelbench
    from drtriton.search import Search, SearchConfig

    if options.init is None:
        raise ValueError("eval needs --init DIR: the checkpoint to evaluate")
    started = time.monotonic()
    device = _device(options.device)
    groups: dict[str, list] = {}
    for k in recipe.rl.stages:  # seeds apart from training's
        programs = Programs.synthesize(recipe.rl.heldout_per_stage, [k], recipe.data.seed + 1000 + k, _bounds(recipe))
        groups[f"synthetic k={k}"] = [from_source(p["code"], "Model", name=p["id"]) for p in programs.records]
    if kernelbench is not None:
        for level in levels:
            problems = load_kernelbench(kernelbench / f"level{level}.jsonl")
            groups[f"KernelBench level {level}"] = problems[:limit] if limit else problems
    policy = HFPolicy(str(options.init), device=device, samples=1, temperature=0.0,
                      max_new_tokens=recipe.rl.max_completion)
    results = {}
    with _verifier(options) as verifier:
        for name, problems in groups.items():
            entries = []
            for i, problem in enumerate(problems):
                search = Search(problem, verifier, SearchConfig(budget_s=300, builtin=False, rounds=1), policies=[policy])
                for _ in search.run():
                    pass
                r = search.result
                verdict = r.verdict or next((a.verdict for a in reversed(r.attempts)), None)
                entries.append(BenchEntry(problem, None, verdict, round(r.seconds, 2), r.plan, r.reason))
                say(f"  {name} [{i + 1}/{len(problems)}] {problem.name}: {verdict.summary if verdict else r.reason}")
            summary = summarize(entries)
            folder = options.out / name.replace(" ", "_").replace("=", "")
            write_report(entries, summary, folder, f"{options.init} on {name}")
            results[name] = {"problems": summary["problems"], "correct": summary["fast_p_eager"]["0.0"],
                             "faster_than_eager": summary["fast_p_eager"]["1.0"],
                             "faster_than_compile": summary["fast_p_compile"]["1.0"]}
            say(f"{name}: correct {results[name]['correct']:.0%}, faster than eager "
                f"{results[name]['faster_than_eager']:.0%}, than torch.compile {results[name]['faster_than_compile']:.0%}")
    summary = {"checkpoint": str(options.init), "device": device, "results": results,
               "seconds": round(time.monotonic() - started, 1)}
    return _finish(options.out, "eval", summary, [])
