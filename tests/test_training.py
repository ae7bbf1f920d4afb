"""Training on a CPU: SFT then DRPO of the tiny recipe through `drtriton-train` with rewards from the
real verifier, the trainer's DRPO loss against a hand computation, the curriculum's stage change,
the GRPO ablation, and the 7B recipe's dry runs. The pure DRPO math is in test_drpo_math.py."""

from __future__ import annotations

import contextlib
import json
import math

import pytest

pytest.importorskip("trl")
pytest.importorskip("ortools")

import torch  # noqa: E402

from drtriton.training import runs, sampling  # noqa: E402
from drtriton.training.cli import main  # noqa: E402
from drtriton.training.curriculum import CurriculumCallback, CurriculumDataset  # noqa: E402
from drtriton.training.data import read_jsonl, rl_prompts, write_jsonl  # noqa: E402
from drtriton.training.drpo import DRPOConfig, DRPOTrainer, kl_penalty  # noqa: E402
from drtriton.training.metrics import read  # noqa: E402
from drtriton.training.recipes import TINY  # noqa: E402
from drtriton.training.rewards import VerifierRewards  # noqa: E402
from drtriton.verify import Verdict  # noqa: E402
from verifier_cases import HACKS, RELU, RELU_OK, ROW_SUM, ROW_SUM_OK  # noqa: E402

CHECKPOINT_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def fenced(code: str) -> str:
    return f"```python\n{code.strip()}\n```"


def step_rows(path):
    """metrics.jsonl rows of optimiser steps (not the final summary or curriculum rows)."""
    return [r for r in read(path) if "loss" in r and "train_loss" not in r]


def finite(*values) -> bool:
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def load(path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory):
    """Two SFT steps of the tiny recipe, once per module: pairs taught by the built-in policy and
    verified, a tokenizer and model built from scratch, then trained."""
    out = tmp_path_factory.mktemp("training") / "sft"
    assert main(["sft", "--recipe", "tiny", "--small", "--device", "cpu", "--out", str(out), "--max-steps", "2"]) == 0
    return out


# -- (a) SFT then DRPO through the command line ----------------------------------------------------


def test_sft_writes_data_checkpoint_and_metrics(sft_run):
    for name in CHECKPOINT_FILES:
        assert (sft_run / "model" / name).is_file(), name
    pairs = read_jsonl(sft_run / "data" / "sft.jsonl")
    assert pairs and all(p["k"] == 1 and p["teacher"] for p in pairs)
    for p in pairs:  # the shared prompt format, answered by a verified module in a fenced block
        assert [m["role"] for m in p["messages"]][0] == "system"
        assert p["messages"][-1]["role"] == "assistant" and p["messages"][-1]["content"].startswith("```python")
    rows = step_rows(sft_run / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2]
    assert all(finite(r["loss"], r["grad_norm"]) and r["loss"] > 0 for r in rows)
    summary = json.loads((sft_run / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["pairs"] == len(pairs) and finite(summary["train_loss"])
    # the held-out programs (never trained on) were answered and verified: a rate, whatever it is
    assert 0.0 <= summary["heldout_pass1"] <= 1.0
    assert "loss" in (sft_run / "metrics.svg").read_text()


def test_sft_sizes_a_model_built_from_scratch(sft_run, tmp_path):
    """`--hidden/--layers`: the same pairs (reused, not taught again) on a model of another size."""
    import shutil

    out = tmp_path / "wide"
    shutil.copytree(sft_run / "data", out / "data")
    base = ["sft", "--recipe", "tiny", "--small", "--device", "cpu", "--out", str(out), "--max-steps", "1"]
    assert main(base + ["--hidden", "48", "--layers", "2"]) == 0
    config = json.loads((out / "model" / "config.json").read_text())
    assert (config["hidden_size"], config["num_hidden_layers"]) == (48, 2)
    for bad in (["--hidden", "49"], ["--hidden", "50"]):  # heads of odd size (2 heads here): a clear error
        with pytest.raises(SystemExit):
            main(base + bad)
    with pytest.raises(SystemExit):  # a checkpoint keeps its size
        main(base + ["--hidden", "64", "--init", str(sft_run / "model")])
    with pytest.raises(SystemExit):  # a pretrained recipe's model has its own size
        main(["sft", "--recipe", "qwen2.5-coder-7b", "--dry-run", "--out", str(tmp_path / "q"), "--hidden", "64"])


def test_teach_adds_pairs_from_another_seed_and_keeps_the_held_out_set(tmp_path):
    out = tmp_path / "sft"
    base = ["teach", "--recipe", "tiny", "--small", "--device", "cpu", "--out", str(out), "--programs", "2"]
    assert main(base) == 0
    first, heldout = read_jsonl(out / "data" / "sft.jsonl"), read_jsonl(out / "data" / "heldout.jsonl")
    assert first and all(p["messages"][-1]["role"] == "assistant" for p in first)
    assert not (out / "data" / "sft.partial.jsonl").exists()
    assert main(base + ["--seed", "5"]) == 0
    both = read_jsonl(out / "data" / "sft.jsonl")
    ids = [p["id"] for p in both]
    assert both[:len(first)] == first and len(both) > len(first) and len(set(ids)) == len(ids)
    assert read_jsonl(out / "data" / "heldout.jsonl") == heldout
    assert not set(ids) & {p["id"] for p in heldout}


def test_teach_keeps_what_an_interrupted_run_verified(tmp_path):
    out = tmp_path / "sft"
    base = ["teach", "--recipe", "tiny", "--small", "--device", "cpu", "--out", str(out), "--programs", "2"]
    assert main(base) == 0
    pairs = read_jsonl(out / "data" / "sft.jsonl")
    # as if a run had been stopped after verifying one pair: sft.jsonl not yet written
    write_jsonl(out / "data" / "sft.partial.jsonl", pairs[:1])
    (out / "data" / "sft.jsonl").unlink()
    assert main(base + ["--seed", "3"]) == 0
    again = read_jsonl(out / "data" / "sft.jsonl")
    assert again[0] == pairs[0] and len({p["id"] for p in again}) == len(again)


def test_each_purpose_draws_its_own_programs(tmp_path):
    from drtriton.training.runs import _trained_on, program_seed

    seeds = {program_seed(purpose, seed, i) for purpose in ("sft", "rl", "eval") for seed in range(3)
             for i in range(3)}
    assert len(seeds) == 27  # no stream reused: `teach --seed 1` no longer draws RL seed 0's prompts
    # what a checkpoint was trained on: its run's data and, through `init`, the run it started from
    sft, rl = tmp_path / "sft", tmp_path / "drpo"
    write_jsonl(sft / "data" / "sft.jsonl", [{"id": "a"}])
    write_jsonl(sft / "data" / "heldout.jsonl", [{"id": "h"}])
    write_jsonl(rl / "data" / "stage0_k1.jsonl", [{"id": "b"}])
    write_jsonl(rl / "data" / "heldout0_k1.jsonl", [{"id": "h2"}])
    (rl / "summary.json").write_text(json.dumps({"init": str(sft / "model")}))
    assert _trained_on(rl / "model") == {"a", "b"} and _trained_on(sft / "model") == {"a"}
    assert _trained_on(tmp_path / "elsewhere" / "model") == set()


def test_drpo_two_steps_through_the_cli(sft_run, tmp_path, monkeypatch):
    out = tmp_path / "drpo"
    # the sampler decodes while holding the GPU as the verifier shares it (on a GPU, Verifier.gpu):
    # a rollout's timing never overlaps the decoding of the others
    held, sampled_holding = [], []

    @contextlib.contextmanager
    def shared():
        held.append(True)
        try:
            yield
        finally:
            held.pop()

    real_sample = sampling.sample

    def sample(*args, **kwargs):
        if "on_done" in kwargs:  # the trainer's rollouts (held-out answers come through complete_chats)
            sampled_holding.append(bool(held))
        return real_sample(*args, **kwargs)

    monkeypatch.setattr(DRPOTrainer, "gpu_shared", staticmethod(shared))
    monkeypatch.setattr(sampling, "sample", sample)
    # ... and lets it go before the rewards wait for verdicts (whose timing holds the GPU alone)
    rewarded_holding, verdicts = [], VerifierRewards.verdicts

    def recording_verdicts(self, *args):
        rewarded_holding.append(bool(held))
        return verdicts(self, *args)
    monkeypatch.setattr(VerifierRewards, "verdicts", recording_verdicts)
    assert main(["drpo", "--recipe", "tiny", "--small", "--device", "cpu", "--init", str(sft_run / "model"),
                 "--out", str(out), "--max-steps", "2"]) == 0
    for name in CHECKPOINT_FILES:
        assert (out / "model" / name).is_file(), name
    # RL prompts by curriculum stage (small recipe: k = 1, 2), each with a held-out set
    for stage, k in enumerate((1, 2)):
        rows = read_jsonl(out / "data" / f"stage{stage}_k{k}.jsonl")
        assert rows and all(r["k"] == k and r["problem_class"] == "Model" for r in rows)
        assert read_jsonl(out / "data" / f"heldout{stage}_k{k}.jsonl")
    rows = step_rows(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        assert finite(r["loss"], r["kl"], r["rewards/correctness/mean"], r["drpo/prompts_with_signal"])
        assert 0.0 <= r["rewards/correctness/mean"] <= 1.0
        assert r["stage"] == 0 and r["stage_k"] == 1 and r["prompts/k"] == 1
        assert finite(r["time/generation_s"], r["time/verification_s"], r["time/update_s"])
        assert r["verified"] >= 2  # the rewards went through VerifierRewards
    summary = json.loads((out / "summary.json").read_text())
    assert summary["algorithm"] == "drpo" and summary["steps"] == 2 and summary["final_stage"] == 0
    # the curriculum checked the held-out pass@1 of the SFT checkpoint (step 0), then once per step
    # (eval_every 1), not twice at the end
    assert [c["step"] for c in summary["curriculum"]] == [0, 1, 2]
    assert "rewards/correctness/mean" in (out / "metrics.svg").read_text()
    assert len(sampled_holding) == 2 and all(sampled_holding)  # each step's rollouts
    assert rewarded_holding and not any(rewarded_holding) and not held  # released, and not left held


def test_drpo_resumes_where_a_time_limit_stopped_it(sft_run, tmp_path):
    """A time limit stops the run after its first step and saves a checkpoint there; `--resume`
    goes on from it (step 2, not step 1 again) with the curriculum's checks so far."""
    out = tmp_path / "drpo"
    common = ["drpo", "--recipe", "tiny", "--small", "--device", "cpu", "--init", str(sft_run / "model"),
              "--out", str(out), "--max-steps", "3"]
    assert main(common + ["--time-limit", "0.001"]) == 0
    assert [r["step"] for r in step_rows(out / "metrics.jsonl")] == [1]
    assert (out / "trainer" / "checkpoint-1" / "optimizer.pt").is_file()
    assert [c["step"] for c in json.loads((out / "curriculum.json").read_text())] == [0, 1]
    with pytest.raises(SystemExit) as refused:  # without --resume: checkpoints of another run are in the way
        main(common)
    assert refused.value.code == 2
    assert main(common + ["--resume"]) == 0
    assert [r["step"] for r in step_rows(out / "metrics.jsonl")] == [1, 2, 3]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 3 and [c["step"] for c in summary["curriculum"]] == [0, 1, 2, 3]


# -- DRPO with scripted rollouts: real verdicts, the loss by hand, the stage change in training ----


def _script_rollouts(monkeypatch, tokenizer):
    """Rollouts without sampling: in each group of two, the first answers with an honest kernel for
    the prompt's problem, the second with a module the verifier refuses (PyTorch does the work)."""
    honest = {"torch.relu": RELU_OK, "torch.sum": ROW_SUM_OK}
    cheat = fenced(HACKS["row1_pytorch_does_the_work_kernel_unused"][1])
    calls = []

    def generate(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        completions = []
        ended = self._on_rollout_done(len(prompt_ids))  # what the sampler calls as a rollout ends
        for i, ids in enumerate(prompt_ids):
            task = tokenizer.decode(ids).rsplit("<|im_start|>user", 1)[-1]  # the program to convert
            good = next(fenced(code) for marker, code in honest.items() if marker in task)
            text = good if i % 2 == 0 else cheat
            completions.append(tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id])
            if i % 2 == 0:  # the honest rollout ends first: its verification starts during "generation"
                ended(i, completions[-1])
        calls.append((list(prompt_ids), completions))
        return completions, None

    monkeypatch.setattr(DRPOTrainer, "_generate_single_turn", generate)
    return calls


def _mean_logprob(model, prompt, completion, temperature) -> float:
    """s(o): the mean token log-probability of the completion under the sampling policy (TRL
    scores tokens at the sampling temperature)."""
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logps = torch.log_softmax(model(ids).logits[0, :-1].float() / temperature, dim=-1)
    targets = ids[0, len(prompt):]
    return logps[len(prompt) - 1:].gather(1, targets[:, None]).mean().item()


def test_drpo_with_scripted_rollouts(sft_run, tmp_path, monkeypatch):
    out = tmp_path / "drpo"
    relu = rl_prompts([{"id": "relu", "k": 1, "code": RELU}])
    row_sum = rl_prompts([{"id": "row_sum", "k": 2, "code": ROW_SUM}])
    for name, rows in {"stage0_k1": relu, "heldout0_k1": relu, "stage1_k2": row_sum, "heldout1_k2": row_sum}.items():
        write_jsonl(out / "data" / f"{name}.jsonl", rows)  # rl_data reuses these
    sft_model, tokenizer = load(sft_run / "model")
    calls = _script_rollouts(monkeypatch, tokenizer)
    evaluated = []

    heldout_verified = []  # what the held-out checks' rewards had verified when they were asked

    def held_out_pass1(model, tok, rewards, rows, max_new_tokens):
        evaluated.append([r["id"] for r in rows])
        heldout_verified.append(rewards.verified)
        return 1.0  # above the threshold: the curriculum moves on after step 1

    monkeypatch.setattr(runs, "pass_at_1", held_out_pass1)
    assert main(["drpo", "--recipe", "tiny", "--small", "--device", "cpu", "--init", str(sft_run / "model"),
                 "--out", str(out), "--max-steps", "3", "--verifier-workers", "1"]) == 0

    rows = step_rows(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3]
    for r in rows:  # one honest and one refused rollout per prompt, as the real verifier judged them
        assert r["rewards/correctness/mean"] == 0.5
        assert r["drpo/prompts_with_signal"] == 1.0
    # each step logs its slowest verification and where that time went
    assert rows[0]["verify/slowest/s"] > 0 and rows[0]["verify/slowest/status"] in ("correct", "rejected")
    assert rows[0]["verify/slowest/static"] >= 0 and rows[0]["verify/slowest/trials"] > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["verification_s"] > 0
    # the honest rollouts' early verifications were the ones the rewards used (the text the trainer
    # decoded matched the sampler's), each verified once
    # two distinct honest rollouts (relu, then row sum: a repeat is a cached verdict) and two refused
    assert summary["verified_early"] == 2 and summary["verified_completions"] == 4
    # the held-out checks have rewards of their own: the rollouts' verifications are not theirs (and
    # the step metrics count rollouts only)
    assert len(heldout_verified) > 1 and heldout_verified == [0] * len(heldout_verified)

    # step 1's loss by hand: with one correct and one wrong rollout the coefficients are +1 and -1,
    # so loss = -(s_correct - s_wrong); the policy is still the reference, so the KL term is 0
    prompts, completions = calls[0]
    temperature = TINY.rl.temperature
    s_correct = _mean_logprob(sft_model, prompts[0], completions[0], temperature)
    s_wrong = _mean_logprob(sft_model, prompts[1], completions[1], temperature)
    assert rows[0]["loss"] == pytest.approx(-(s_correct - s_wrong), rel=1e-4, abs=1e-5)
    assert rows[0]["kl"] == pytest.approx(0.0, abs=1e-6)
    assert rows[0]["loss"] != 0.0

    # the update moved the weights
    trained, _ = load(out / "model")
    assert any(not torch.equal(a, b) for a, b in zip(sft_model.state_dict().values(), trained.state_dict().values()))

    # the curriculum: stage 1's held-out set reached pass@1 >= 50% after step 1, so training moved
    # on to stage 2's programs (k = 2: the row sum). The prompts of the next step are already read
    # (accelerate's data loader reads one batch ahead), so the change shows one step later.
    assert evaluated == [["relu"], ["relu"], ["row_sum"], ["row_sum"]]  # step 0: the SFT checkpoint
    assert summary["curriculum"][0] == {"step": 0, "stage": 0, "heldout_pass1": 1.0, "advanced": False}
    assert summary["curriculum"][1] == {"step": 1, "stage": 0, "heldout_pass1": 1.0, "advanced": True}
    assert summary["final_stage"] == 1 and [r["stage"] for r in rows] == [1, 1, 1]
    assert rows[0]["prompts/k"] == 1 and rows[-1]["prompts/k"] == 2  # what each step trained on
    assert "torch.relu" in tokenizer.decode(calls[0][0][0])
    assert "torch.sum" in tokenizer.decode(calls[-1][0][0])


# -- (d) the trainer's DRPO loss on a hand-made batch -----------------------------------------------


def test_trainer_loss_matches_hand_computation(sft_run, tmp_path):
    from datasets import Dataset

    model, tokenizer = load(sft_run / "model")
    args = DRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2, beta=10.0,
                      kl_delta=0.01, max_completion_length=8, use_cpu=True, bf16=False, report_to=[],
                      save_strategy="no")  # TRL's configs default to bf16, which autocasts even on a CPU
    trainer = DRPOTrainer(model=model, reward_funcs=[lambda completions, **kw: [0.0] * len(completions)], args=args,
                          train_dataset=Dataset.from_list([{"prompt": "x"}] * 4), processing_class=tokenizer)
    torch.manual_seed(0)
    vocab = len(tokenizer)
    prompt_ids = torch.randint(5, vocab, (4, 6))
    completion_ids = torch.randint(5, vocab, (4, 5))
    completion_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 0, 0, 0, 0]])
    advantages = torch.tensor([0.7, -0.3, 1.0, -1.0])  # two prompts' coefficients
    ids = torch.cat([prompt_ids, completion_ids], 1)
    with torch.no_grad():
        logits = model(ids).logits[:, prompt_ids.shape[1] - 1:-1].float()
    logps = torch.log_softmax(logits, -1).gather(2, completion_ids[..., None])[..., 0]
    ref = logps - 0.3  # a reference far enough away that the KL constraint is active
    inputs = {"prompt_ids": prompt_ids, "prompt_mask": torch.ones_like(prompt_ids), "completion_ids": completion_ids,
              "completion_mask": completion_mask, "advantages": advantages, "ref_per_token_logps": ref}

    scores = (logps * completion_mask).sum(1) / completion_mask.sum(1)
    per_token_kl = torch.exp(ref - logps) - (ref - logps) - 1
    kl = (per_token_kl * completion_mask).sum() / completion_mask.sum()
    assert kl.item() > 0.01
    expected = -(advantages * scores).sum() / 2 + 10.0 * (kl - 0.01) * kl  # averaged over 2 prompts

    model.train()
    for accumulation in (1, 2):  # the loss comes scaled for gradient accumulation
        trainer.current_gradient_accumulation_steps = accumulation
        loss = trainer._compute_loss(model, inputs)
        assert loss.item() == pytest.approx(expected.item() / accumulation, rel=1e-5)
    assert kl_penalty(kl, 10.0, 0.01).item() > 0
    # the gradient flows through the sequence scores: a positive coefficient raises its rollout
    model.zero_grad()
    trainer.current_gradient_accumulation_steps = 1
    trainer._compute_loss(model, {**inputs, "advantages": torch.tensor([1.0, -1.0, 0.0, 0.0]),
                                  "ref_per_token_logps": logps}).backward()
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p -= 1e-2 * p.grad
        after = torch.log_softmax(model(ids).logits[:, prompt_ids.shape[1] - 1:-1].float(), -1)
    after = after.gather(2, completion_ids[..., None])[..., 0]
    new_scores = (after * completion_mask).sum(1) / completion_mask.sum(1)
    assert new_scores[0] - new_scores[1] > scores[0] - scores[1]


# -- (b) rewards from the real verifier --------------------------------------------------------------


def test_verifier_rewards_correctness(cpu_verifier):
    rewards = VerifierRewards(cpu_verifier)
    correctness, speed = rewards.functions
    assert [f.__name__ for f in rewards.functions] == ["correctness", "speed"]  # TRL's metric names
    cases = {
        "honest": fenced(RELU_OK),
        "pytorch does the work": fenced(HACKS["row1_pytorch_does_the_work_kernel_unused"][1]),
        "calls the reference": fenced(HACKS["row2_calls_reference_model"][1]),
        "garbage": "I would use a kernel here.",
        "broken code": "```python\nclass ModelNew(:\n```",
    }
    completions = [[{"role": "assistant", "content": text}] for text in cases.values()]
    kwargs = {"problem_source": [RELU] * len(cases), "problem_class": ["Model"] * len(cases)}
    scores = dict(zip(cases, correctness(prompts=[None] * len(cases), completions=completions, **kwargs)))
    assert scores == {"honest": 1.0, "pytorch does the work": 0.0, "calls the reference": 0.0,
                      "garbage": 0.0, "broken code": 0.0}
    verified = rewards.verified
    # the second function reads the same verdicts: nothing verified again; on a CPU nothing is timed
    assert speed(prompts=[None] * len(cases), completions=completions, **kwargs) == [None] * len(cases)
    assert rewards.verified == verified and rewards.seconds > 0
    rewards.close()


class _StubVerifier:
    """Verdicts by code, for the speed reward's sign (timing needs a GPU)."""

    class config:
        workers = 1

    def __init__(self, verdicts):
        self.verdicts = verdicts
        self.calls = 0

    def verify(self, problem, code, mode="strict", quick=False):
        assert quick, "rewards are timed against eager only (quick checks)"
        self.calls += 1
        return self.verdicts[code.strip()]


def test_speed_reward_is_log_speedup_for_correct_completions_only():
    verdicts = {"fast": Verdict(correct=True, status="correct", speedup_eager=2.0),
                "slow": Verdict(correct=True, status="correct", speedup_eager=0.5),
                "wrong_but_fast": Verdict(correct=False, status="incorrect", speedup_eager=3.0)}
    code = {name: f"class ModelNew:\n    name = {name!r}" for name in verdicts}
    stub = _StubVerifier({code[name]: v for name, v in verdicts.items()})
    rewards = VerifierRewards(stub)
    correctness, speed = rewards.functions
    completions = [fenced(code[name]) for name in verdicts]
    kwargs = {"problem_source": [RELU] * 3, "problem_class": ["Model"] * 3}
    values = speed(prompts=[None] * 3, completions=completions, **kwargs)
    assert values[0] == pytest.approx(math.log(2.0)) and values[0] > 0
    assert values[1] == pytest.approx(math.log(0.5)) and values[1] < 0
    assert values[2] is None  # an incorrect rollout gets no speed reward, however fast
    assert correctness(prompts=[None] * 3, completions=completions, **kwargs) == [1.0, 1.0, 0.0]
    assert stub.calls == 3  # one verification per completion serves both functions
    # a new batch: verified once, and the cache keeps only that batch
    assert speed(prompts=[None], completions=[fenced(code["fast"]) + " "], problem_source=[RELU],
                 problem_class=["Model"]) == [pytest.approx(math.log(2.0))]
    assert stub.calls == 4 and len(rewards._verdicts) == 1
    rewards.close()


class _BrokenVerifier(_StubVerifier):
    def verify(self, problem, code, mode="strict", quick=False):
        self.calls += 1
        if "boom" in code:
            raise RuntimeError("worker pool went away")
        return self.verdicts[code.strip()]


def test_a_rollout_that_breaks_the_verifier_scores_zero_and_the_batch_goes_on():
    ok = "class ModelNew:\n    name = 'ok'"
    stub = _BrokenVerifier({ok: Verdict(correct=True, status="correct", speedup_eager=1.5)})
    rewards = VerifierRewards(stub)
    correctness, _ = rewards.functions
    completions = [fenced(ok), fenced("class ModelNew:\n    name = 'boom'"), fenced(ok + " ")]
    kwargs = {"problem_source": [RELU, RELU, "this is not python ("], "problem_class": ["Model"] * 3}
    assert correctness(prompts=[None] * 3, completions=completions, **kwargs) == [1.0, 0.0, 0.0]
    broken = rewards.verdicts(completions, kwargs["problem_source"], kwargs["problem_class"])
    assert "RuntimeError: worker pool went away" in broken[1].reasons[0]
    assert broken[2].reasons[0].startswith("verification failed:")  # the problem itself did not load
    rewards.close()


# -- (c) the curriculum -----------------------------------------------------------------------------


def _stages():
    return [[{"k": 1, "id": f"a{i}"} for i in range(3)], [{"k": 2, "id": f"b{i}"} for i in range(3)],
            [{"k": 5, "id": f"c{i}"} for i in range(3)]]


class _State:
    def __init__(self, step):
        self.global_step = step


def test_curriculum_advances_at_the_threshold_and_not_below():
    dataset = CurriculumDataset(_stages())
    heldout = [[{"k": 1}], [{"k": 2}], [{"k": 5}]]
    rates = iter([0.49, 0.5, 0.2, 0.9, 1.0])
    seen, logged = [], []

    def evaluate(rows):
        seen.append(rows[0]["k"])
        return next(rates)

    callback = CurriculumCallback(dataset, heldout, evaluate, threshold=0.5, every=2, log=logged.append)
    callback.on_step_end(None, _State(1), None)  # not a multiple of `every`: no evaluation
    assert seen == [] and dataset.stage == 0
    for step, stage_after in [(2, 0), (4, 1), (6, 1), (8, 2), (10, 2)]:
        callback.on_step_end(None, _State(step), None)
        assert dataset.stage == stage_after, step
    assert seen == [1, 1, 2, 2, 5]  # each check uses the current stage's held-out set
    assert [r["advanced"] for r in logged] == [False, True, False, True, False]  # the last stage stays
    assert logged[1] == {"step": 4, "stage": 0, "heldout_pass1": 0.5, "advanced": True}
    assert callback.history == logged


def test_curriculum_stream_follows_the_stage():
    dataset = CurriculumDataset(_stages(), seed=1)
    stream = iter(dataset.as_iterable())
    first = [next(stream) for _ in range(5)]
    assert {r["k"] for r in first} == {1}
    assert sorted(r["id"] for r in first[:3]) == ["a0", "a1", "a2"]  # a shuffled pass over the stage
    dataset.advance()
    assert {next(stream)["k"] for _ in range(6)} == {2}  # at once, not after the current pass
    assert dataset[4]["k"] == 2 and len(dataset) == 3


# -- (e) the GRPO ablation ------------------------------------------------------------------------


def test_grpo_ablation_takes_a_step(sft_run, tmp_path, monkeypatch):
    from drtriton.training import sampling

    batches, real = [], sampling.sample
    monkeypatch.setattr(sampling, "sample", lambda model, prompts, *a, **k: batches.append(len(prompts)) or
                        real(model, prompts, *a, **k))
    configs, verifier = [], runs.Verifier
    monkeypatch.setattr(runs, "Verifier", lambda config: configs.append(config) or verifier(config))
    trainer_args, init = [], DRPOTrainer.__init__

    def recording_init(self, *a, **kw):
        trainer_args.append(kw["args"])
        init(self, *a, **kw)
    monkeypatch.setattr(DRPOTrainer, "__init__", recording_init)
    out = tmp_path / "grpo"
    assert main(["drpo", "--algorithm", "grpo", "--recipe", "tiny", "--small", "--device", "cpu",
                 "--init", str(sft_run / "model"), "--out", str(out), "--max-steps", "1", "--stages", "1"]) == 0
    # a stuck rollout holds a step no longer than the recipe's verification timeout, and rewards
    # time the configurations the trials tuned
    assert [c.timeout_s for c in configs] == [TINY.rl.verify_timeout_s]
    # ... nor one whose kernels take long to compile (a load held a step 123 s)
    assert [c.load_timeout_s for c in configs] == [TINY.rl.verify_load_timeout_s] and \
        TINY.rl.verify_load_timeout_s < 60
    assert [c.retune_before_timing for c in configs] == [False]
    # GRPO's reward is correctness + 0.1 x the speed reward: a correct rollout slower than eager
    # still outranks a wrong one (at weight 1 it did not, and GRPO un-learned correctness)
    assert trainer_args[0].reward_weights == [1.0, TINY.rl.grpo_speed_weight] and TINY.rl.grpo_speed_weight == 0.1
    # the step's rollouts came from the fast sampler (the held-out checks use it too)
    assert TINY.for_tests().rl.rollouts * TINY.for_tests().rl.prompts_per_step in batches
    rows = step_rows(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1]
    assert finite(rows[0]["loss"], rows[0]["rewards/correctness/mean"])
    assert "drpo/prompts_with_signal" not in rows[0] and "kl" not in rows[0]  # TRL's GRPO, beta 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["algorithm"] == "grpo" and summary["steps"] == 1
    assert summary["settings"]["stages"] == [1] and sorted(p.name for p in (out / "data").iterdir()) == \
        ["heldout0_k1.jsonl", "stage0_k1.jsonl"]  # --stages 1: one operator throughout
    assert (out / "model" / "model.safetensors").is_file()


def test_eval_reports_by_k(sft_run, tmp_path):
    out = tmp_path / "eval"
    assert main(["eval", "--recipe", "tiny", "--small", "--device", "cpu", "--init", str(sft_run / "model"),
                 "--out", str(out)]) == 0
    results = json.loads((out / "summary.json").read_text())["results"]
    assert set(results) == {"synthetic k=1", "synthetic k=2"}
    for name, r in results.items():
        assert r["problems"] == 1 and 0.0 <= r["faster_than_eager"] <= r["correct"] <= 1.0
        assert (out / name.replace(" ", "_").replace("=", "") / "verdicts.jsonl").is_file()
        answers = read_jsonl(out / name.replace(" ", "_").replace("=", "") / "answers.jsonl")
        assert len(answers) == 1 and isinstance(answers[0]["answer"], str)
        assert answers[0]["correct"] == (r["correct"] == 1.0)  # each answer with its verdict, for paired comparisons
        ci = r["intervals"]["correct"]
        assert ci["low"] <= r["correct"] <= ci["high"] and ci["high"] - ci["low"] > 0.5  # one program: wide


def test_eval_takes_more_programs_other_ks_and_pass_at_k(sft_run, tmp_path):
    out = tmp_path / "eval"
    assert main(["eval", "--recipe", "tiny", "--small", "--device", "cpu", "--init", str(sft_run / "model"),
                 "--out", str(out), "--heldout", "2", "--ks", "1", "--pass-k", "2"]) == 0
    results = json.loads((out / "summary.json").read_text())["results"]
    assert set(results) == {"synthetic k=1"}
    r = results["synthetic k=1"]
    assert r["problems"] == 2 and 0.0 <= r["pass@2"] <= 1.0
    assert r["intervals"]["pass@2"]["low"] <= r["pass@2"] <= r["intervals"]["pass@2"]["high"]
    answers = read_jsonl(out / "synthetic_k1" / "answers.jsonl")
    assert sum(a["pass@2"] for a in answers) == round(r["pass@2"] * 2)


def test_runs_share_a_plot_and_noisy_rewards_are_smoothed(tmp_path):
    from drtriton.training.metrics import moving_mean, plot

    drpo = [{"step": i, "rewards/correctness/mean": float(i % 2)} for i in range(1, 7)] + \
        [{"step": 6, "heldout_pass1": 0.5}]
    grpo = [{"step": i, "rewards/correctness/mean": 0.25} for i in range(1, 7)]
    smoothed = moving_mean(drpo, "rewards/correctness/mean", 2)
    assert [r["rewards/correctness/mean"] for r in smoothed[:6]] == [1.0, 0.5, 0.5, 0.5, 0.5, 0.5]
    assert smoothed[6] == {"step": 6, "heldout_pass1": 0.5}
    svg = plot({"drpo": smoothed, "grpo": grpo}, ["heldout_pass1", "rewards/correctness/mean"], tmp_path / "p.svg",
               "t").read_text()
    assert svg.count("<path") == 3  # pass@1: drpo only; rewards: both runs
    assert ">drpo</text>" in svg and ">grpo</text>" in svg


def test_wilson_interval():
    from drtriton.training.metrics import wilson

    low, high = wilson(80, 200)  # 40% of 200: about 33-47%
    assert 0.33 < low < 0.34 and 0.46 < high < 0.48
    assert wilson(0, 10)[0] == 0.0 and 0.0 < wilson(0, 10)[1] < 0.35  # none of 10: not "exactly 0"
    assert wilson(10, 10)[1] == 1.0 and wilson(0, 0) == (0.0, 1.0)


# -- (f) the paper's recipe, reduced -----------------------------------------------------------------


@pytest.mark.parametrize("stage", ["sft", "drpo"])
def test_qwen_recipe_dry_run(stage, sft_run, tmp_path):
    import shutil

    from transformers import AutoConfig

    from drtriton.training.recipes import QWEN_7B

    out = tmp_path / stage
    if stage == "sft":  # a dry run uses test-size data, the same as the tiny run's: reuse its verified pairs
        shutil.copytree(sft_run / "data", out / "data")
    steps = 2 if stage == "sft" else 1  # one step by default, --max-steps for more
    extra = ["--max-steps", "2"] if steps == 2 else []
    assert main([stage, "--recipe", "qwen2.5-coder-7b", "--dry-run", "--device", "cpu", "--out", str(out), *extra]) == 0
    config = AutoConfig.from_pretrained(out / "model")
    full = QWEN_7B.model.architecture
    # the 7B's architecture, reduced in size only
    assert config.model_type == "qwen2" and config.num_hidden_layers == 2 and config.hidden_size == 64
    assert config.rope_parameters["rope_theta"] == full["rope_theta"]
    assert config.num_key_value_heads < config.num_attention_heads  # grouped-query attention, like the 7B
    assert config.max_position_embeddings == full["max_position_embeddings"]
    assert config.tie_word_embeddings is False
    rows = step_rows(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == list(range(1, steps + 1)) and all(finite(r["loss"]) for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["recipe"] == "qwen2.5-coder-7b" and summary["steps"] == steps
    assert summary["parallelism"] == "1 process, NO"  # under accelerate + zero3.yaml: "2 processes, DEEPSPEED, ZeRO stage 3"
    if stage == "drpo":
        assert summary["algorithm"] == "drpo" and "kl" in rows[0]  # beta 100: a reference model
        assert summary["settings"]["lam"] == 0.1 and summary["settings"]["tau"] == 5.0
        assert summary["settings"]["beta"] == 100.0 and summary["settings"]["rollouts"] == 2  # test size
    else:
        assert summary["settings"]["lr"] == 2e-6 and summary["settings"]["epochs"] == 10


def test_qwen_recipe_ships_its_accelerate_config():
    from drtriton.training.recipes import QWEN_7B, TINY

    text = QWEN_7B.accelerate_config.read_text()
    assert "zero_stage: 3" in text and "distributed_type: DEEPSPEED" in text
    assert QWEN_7B.rl.rollouts == 8 and QWEN_7B.rl.lr == 1e-6 and QWEN_7B.sft.batch * 8 == 64
    assert TINY.accelerate_config is None


def test_time_limit_stops_training_after_the_step_that_passes_it():
    from transformers import TrainerControl

    from drtriton.training.runs import TimeLimit

    control = TrainerControl()
    TimeLimit(3600).on_step_end(None, _State(1), control)
    assert not control.should_training_stop
    TimeLimit(0).on_step_end(None, _State(1), control)
    assert control.should_training_stop


def test_checkpoints_compared_on_the_programs_all_answered(tmp_path):
    import runpy
    import subprocess
    import sys
    from pathlib import Path

    def folder(name, correct):
        write_jsonl(tmp_path / name / "synthetic_k1" / "answers.jsonl",
                    [{"problem": p, "correct": c, "answer": ""} for p, c in correct.items()])
        return tmp_path / name

    sft = folder("eval_sft", {"a": True, "b": False, "c": False, "d": True, "e": False})
    rl = folder("eval_drpo_s0", {"a": True, "b": True, "c": True, "d": False})  # e left out (trained on)
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "compare_evals.py"
    out = subprocess.run([sys.executable, str(script), str(sft), str(rl)], capture_output=True, text=True, check=True).stdout
    assert "4 programs answered by every checkpoint" in out
    assert "| eval_sft | 50.0% (2) |" in out and "| eval_drpo_s0 | 75.0% (3) |" in out
    assert "+2 / -1 | 1.000 |" in out  # 3 discordant pairs, 2 to 1: no evidence either way
    sign_test = runpy.run_path(str(script))["sign_test"]
    assert sign_test(10, 0) == pytest.approx(2 / 1024) and sign_test(0, 0) == 1.0
