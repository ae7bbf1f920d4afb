"""DRPO: correctness first, then speed among the correct rollouts (`docs/method.md`).

Per prompt, with rollouts S+ (correct) and S- (not correct), sequence scores s(o) (mean token
log-probability under the policy) and speed rewards r_s(o) = log(t_torch / t_triton):

    w(o) = softmax over S+ of r_s(o) / lambda
    J    = sum_{o in S+} w(o) * (s(o) - tau * log sum_{o' in S-} exp(s(o') / tau))
    loss = -J  (averaged over prompts)  +  beta * max(KL - delta, 0) * KL

Prompts whose rollouts are all correct or all wrong carry no signal and are skipped.

Since sum_{S+} w = 1, dJ/ds(o) is w(o) for a correct rollout and -softmax_{S-}(s/tau)(o) for an
incorrect one. `drpo_coefficients` computes these per rollout from the scores at sampling time,
so the loss separates over rollouts: -sum_i c_i * s_i, whose gradient equals the DisCO gradient
on-policy, and micro-batches may split a prompt's rollouts.

`DRPOTrainer` is TRL's GRPOTrainer with two changes: the advantages become these coefficients
(computed from the verifier's rewards: function 0 correctness, function 1 speed), and the loss is
the one above. `algorithm="grpo"` keeps TRL's GRPO as the ablation baseline. Both sample their
rollouts with `sampling.py` where it supports the model (the same sampler for both).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

import torch

from . import sampling

try:  # TRL is the training extra; the math below does not need it
    from trl import GRPOConfig, GRPOTrainer
    from trl.models import unwrap_model_for_generation
except ImportError:  # pragma: no cover
    GRPOConfig = GRPOTrainer = object  # type: ignore[misc,assignment]


def drpo_coefficients(correct: torch.Tensor, speed: torch.Tensor, scores: torch.Tensor, group: int,
                      lam: float, tau: float) -> torch.Tensor:
    """Per-rollout coefficients c_i (see the module docstring). Rollouts come in consecutive
    groups of `group` per prompt; `correct` is 0/1, `speed` is r_s (ignored where incorrect),
    `scores` the sequence scores at sampling time."""
    c = correct.view(-1, group).bool()
    r = speed.view(-1, group).float()
    s = scores.view(-1, group).float()
    mixed = c.any(dim=1) & (~c).any(dim=1)
    # positives: softmax of r_s / lambda over the correct rollouts
    pos_logits = torch.where(c, torch.nan_to_num(r, nan=0.0) / lam, torch.full_like(r, float("-inf")))
    w = torch.softmax(pos_logits, dim=1)
    # negatives: softmax of s / tau over the incorrect ones, with a minus sign
    neg_logits = torch.where(~c, s / tau, torch.full_like(s, float("-inf")))
    q = torch.softmax(neg_logits, dim=1)
    out = torch.where(c, w, -q)
    out = torch.where(mixed[:, None], out, torch.zeros_like(out))
    return torch.nan_to_num(out, nan=0.0).view(-1)


def drpo_objective(correct: torch.Tensor, speed: torch.Tensor, scores: torch.Tensor, group: int,
                   lam: float, tau: float) -> torch.Tensor:
    """J averaged over the prompts with both kinds of rollouts, written out directly (for tests
    and reporting; training uses the separable form)."""
    total, count = scores.new_zeros(()), 0
    for cg, rg, sg in zip(correct.view(-1, group).bool(), speed.view(-1, group), scores.view(-1, group)):
        if cg.all() or not cg.any():
            continue
        w = torch.softmax(rg[cg] / lam, dim=0)
        penalty = tau * torch.logsumexp(sg[~cg] / tau, dim=0)
        total = total + (w * (sg[cg] - penalty)).sum()
        count += 1
    return total / max(count, 1)


def kl_penalty(kl: torch.Tensor, beta: float, delta: float) -> torch.Tensor:
    """beta * max(KL - delta, 0) * KL: nothing while the policy stays within delta of the
    reference, a quadratic pull back beyond it."""
    return beta * torch.clamp(kl - delta, min=0.0) * kl


@dataclass
class DRPOConfig(GRPOConfig):
    """GRPOConfig plus DRPO's knobs. `beta` is the KL constraint's weight (it also makes TRL keep
    a reference model); `kl_delta` its threshold."""

    algorithm: str = field(default="drpo", metadata={"help": "drpo, or grpo for the ablation baseline"})
    lam: float = field(default=0.1, metadata={"help": "temperature of the softmax over correct rollouts' speed"})
    tau: float = field(default=5.0, metadata={"help": "temperature of the log-sum-exp over incorrect rollouts"})
    kl_delta: float = field(default=0.01, metadata={"help": "KL allowed before the penalty starts"})
    fast_sampling: bool = field(default=True, metadata={
        "help": "rollouts from training/sampling.py (static cache, CUDA graph) where it supports the model "
                "and the sampling is plain temperature; else transformers' generate"})


class DRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose advantages and loss are DRPO's (unless `algorithm="grpo"`). It also logs
    where a step's time goes: generation, verification (`verification_clock`: seconds the reward
    functions waited for verdicts, set by the caller; with `early_verify` part of the verifying
    happens during generation) and the update."""

    verification_clock = staticmethod(lambda: 0.0)
    # early_verify(text, row): start verifying a rollout as the sampler finishes it (`row` is its
    # dataset row), so verification overlaps the decoding of the longer rollouts; set by the caller
    early_verify = None
    # the GPU as the verifier shares it (`Verifier.gpu.shared`), held from decoding until the
    # rewards are asked for: a rollout verified early is timed with the GPU alone, as timing
    # always is, not beside the step's own GPU work
    gpu_shared = staticmethod(contextlib.nullcontext)
    _gpu_hold = contextlib.ExitStack()
    _scoring_s = 0.0
    _rows: list = []

    def training_step(self, model, inputs, num_items_in_batch=None):
        started, scoring_before = time.monotonic(), self._scoring_s
        loss = super().training_step(model, inputs, num_items_in_batch)
        update = time.monotonic() - started - (self._scoring_s - scoring_before)
        self._metrics["train"]["time/update_s"].append(update)
        return loss

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        plain = (not self.top_k) and self.top_p in (None, 1.0) and self.min_p is None and \
            self.repetition_penalty in (None, 1.0)
        if not (self.args.fast_sampling and plain and not self.use_vllm and not images and not multimodal_fields
                and sampling.supports(self.accelerator.unwrap_model(self.model))):
            return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations,
                                                 has_tool_images)
        # as TRL generates: the whole model in hand (ZeRO-3 gathers its shards), no gradients
        with unwrap_model_for_generation(self.model_wrapped, self.accelerator,
                                         gather_deepspeed3_params=self.args.ds3_gather_for_generation) as model:
            completion_ids = sampling.sample(model, prompt_ids, self.max_completion_length, self.temperature,
                                             list(self.eos_token_ids), self._tokenizer.pad_token_id,
                                             on_done=self._on_rollout_done(len(prompt_ids)))
        return completion_ids, None

    def _on_rollout_done(self, rollouts: int):
        """The sampler's callback: decode a finished rollout as TRL will and start its verification.
        Only where the rows in hand are this batch's, one per rollout."""
        if self.early_verify is None or len(self._rows) != rollouts:
            return None
        rows, verify = self._rows, self.early_verify

        def done(index: int, ids: list[int]) -> None:
            verify(self.processing_class.decode(ids, skip_special_tokens=True), rows[index])
        return done

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        # the GPU is free for timing from here: the rewards wait for verdicts whose timing holds
        # it alone (holding it on would wait for ourselves)
        self._gpu_hold.close()
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._last_rewards = rewards  # (N, n_funcs), gathered over processes
        return rewards

    def _generate_and_score_completions(self, inputs):
        started, verified_before = time.monotonic(), self.verification_clock()
        self._rows = inputs
        # the GPU as the verifier shares it, from decoding to the rewards (the reference model's
        # pass included): a rollout verified early is timed only when the step's GPU work is done
        self._gpu_hold = contextlib.ExitStack()
        self._gpu_hold.enter_context(self.gpu_shared())
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self._rows = []
            self._gpu_hold.close()
        elapsed, verification = time.monotonic() - started, self.verification_clock() - verified_before
        self._scoring_s += elapsed
        self._metrics["train"]["time/generation_s"].append(elapsed - verification)
        self._metrics["train"]["time/verification_s"].append(verification)
        if inputs and "k" in inputs[0]:  # operators per program of the prompts trained on (curriculum)
            self._metrics["train"]["prompts/k"].append(sum(x["k"] for x in inputs) / len(inputs))
        if self.args.algorithm == "grpo":
            return output
        rewards = self._last_rewards
        correct = torch.nan_to_num(rewards[:, 0], nan=0.0) > 0.5
        speed = torch.nan_to_num(rewards[:, 1], nan=0.0) if rewards.shape[1] > 1 else torch.zeros_like(rewards[:, 0])
        # sequence scores at sampling time (mean token log-prob), for the negatives' softmax
        with torch.no_grad():
            logps = output.get("old_per_token_logps")
            if logps is None:
                ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
                mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
                logps, _, _ = self._get_per_token_logps_and_entropies(
                    self.model, ids, mask, output["completion_ids"].size(1))
            scores = _sequence_means(logps, output["completion_mask"])
        scores = self.accelerator.gather(scores)
        coefficients = drpo_coefficients(correct.float(), speed, scores, self.num_generations,
                                         self.args.lam, self.args.tau)
        local = slice(self.accelerator.process_index * len(output["prompt_ids"]),
                      (self.accelerator.process_index + 1) * len(output["prompt_ids"]))
        output["advantages"] = coefficients[local].to(output["advantages"].device)
        groups = coefficients.view(-1, self.num_generations)
        self._metrics["train"]["drpo/prompts_with_signal"].append(float((groups != 0).any(dim=1).float().mean()))
        return output

    def _compute_loss(self, model, inputs):
        if self.args.algorithm == "grpo":
            return super()._compute_loss(model, inputs)
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        attn = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        mask = inputs["completion_mask"]
        logps, _, _ = self._get_per_token_logps_and_entropies(model, ids, attn, inputs["completion_ids"].size(1))
        scores = _sequence_means(logps, mask)
        # each rollout's coefficient times its score; scaled so a prompt's group sums once
        loss = -(inputs["advantages"] * scores).sum() * self.num_generations / max(len(scores), 1)
        if self.beta != 0.0 and "ref_per_token_logps" in inputs:
            ref = inputs["ref_per_token_logps"]
            per_token_kl = torch.exp(ref - logps) - (ref - logps) - 1
            kl = (per_token_kl * mask).sum() / mask.sum().clamp(min=1.0)
            loss = loss + kl_penalty(kl, self.beta, self.args.kl_delta)
            self._metrics["train"]["kl"].append(self.accelerator.gather(kl.detach()).mean().item())
        # GRPOTrainer tells Trainer its loss is already scaled for gradient accumulation
        # (loss_is_scaled_for_ga), so the scaling is ours to do
        return loss / self.current_gradient_accumulation_steps if self.model.training else loss


def _sequence_means(per_token: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
