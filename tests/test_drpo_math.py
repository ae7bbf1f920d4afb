"""DRPO's coefficients and loss against values worked out by hand."""

import math

import pytest
import torch

from drtriton.training.drpo import drpo_coefficients, drpo_objective, kl_penalty


def coeffs(correct, speed, scores, group=4, lam=0.1, tau=5.0):
    return drpo_coefficients(torch.tensor(correct, dtype=torch.float), torch.tensor(speed, dtype=torch.float),
                             torch.tensor(scores, dtype=torch.float), group, lam, tau)


def test_mixed_group_by_hand():
    # two correct (speed log 2 and 0), two wrong (scores -1, -2); lambda 0.1, tau 5
    c = coeffs([1, 1, 0, 0], [math.log(2), 0.0, 0.0, 0.0], [-0.5, -0.7, -1.0, -2.0])
    w_fast = 1 / (1 + math.exp(-math.log(2) / 0.1))  # softmax([6.93, 0])[0]
    q_first = 1 / (1 + math.exp(-(-1.0 + 2.0) / 5.0))  # softmax([-0.2, -0.4])[0]
    expected = [w_fast, 1 - w_fast, -q_first, -(1 - q_first)]
    assert c.tolist() == pytest.approx(expected, rel=1e-5)


def test_all_correct_and_all_wrong_groups_are_skipped():
    c = coeffs([1, 1, 1, 1, 0, 0, 0, 0], [1.0, 0.5, 0.2, 0.1, 0, 0, 0, 0], [-1.0] * 8)
    assert c.tolist() == [0.0] * 8


def test_ties_share_equally():
    c = coeffs([1, 1, 0, 0], [0.3, 0.3, 0.0, 0.0], [-1.0, -1.0, -3.0, -3.0])
    assert c.tolist() == pytest.approx([0.5, 0.5, -0.5, -0.5])


def test_lambda_limits():
    speed = [0.9, 0.1, 0.5, 0.0]
    hot = coeffs([1, 1, 1, 0], speed, [0.0] * 4, lam=1e6)  # lambda -> inf: uniform over correct
    assert hot[:3].tolist() == pytest.approx([1 / 3] * 3, rel=1e-4)
    cold = coeffs([1, 1, 1, 0], speed, [0.0] * 4, lam=1e-4)  # lambda -> 0: the fastest takes all
    assert cold[:3].tolist() == pytest.approx([1.0, 0.0, 0.0], abs=1e-6)


def test_tau_limits():
    scores = [0.0, -0.5, -2.0, -1.0]
    flat = coeffs([1, 0, 0, 0], [0.0] * 4, scores, tau=1e6)  # tau -> inf: negatives uniform
    assert flat[1:].tolist() == pytest.approx([-1 / 3] * 3, rel=1e-4)
    sharp = coeffs([1, 0, 0, 0], [0.0] * 4, scores, tau=1e-4)  # tau -> 0: the likeliest negative
    assert sharp[1:].tolist() == pytest.approx([-1.0, 0.0, 0.0], abs=1e-6)


def test_coefficients_are_the_gradient_of_the_objective():
    correct = torch.tensor([1, 0, 1, 0, 0, 1, 1, 1], dtype=torch.float)
    speed = torch.tensor([0.4, 0.0, -0.2, 0.0, 0.0, 0.1, 0.3, 0.2])
    scores = torch.tensor([-0.3, -0.8, -0.5, -1.2, -0.1, -0.9, -0.4, -0.6], requires_grad=True)
    objective = drpo_objective(correct, speed, scores, group=4, lam=0.1, tau=5.0)
    objective.backward()
    c = drpo_coefficients(correct, speed, scores.detach(), group=4, lam=0.1, tau=5.0)
    # both groups have correct and wrong rollouts; the objective averages over the 2 prompts
    assert (scores.grad * 2).tolist() == pytest.approx(c.tolist(), abs=1e-6)


def test_objective_by_hand():
    correct = torch.tensor([1.0, 0.0])
    j = drpo_objective(correct, torch.tensor([0.0, 0.0]), torch.tensor([-0.5, -1.5]), group=2, lam=0.1, tau=5.0)
    assert j.item() == pytest.approx(-0.5 - 5.0 * (-1.5 / 5.0))  # log-sum-exp of one term


def test_kl_penalty():
    assert kl_penalty(torch.tensor(0.005), beta=100, delta=0.01).item() == 0.0
    assert kl_penalty(torch.tensor(0.03), beta=100, delta=0.01).item() == pytest.approx(100 * 0.02 * 0.03)


def test_untimed_correct_rollouts_share_equally_and_skipped_groups_stay_zero():
    # TRL turns a speed reward of None (nothing timed, e.g. on a CPU) into NaN
    nan = float("nan")
    c = coeffs([1, 1, 0, 0, 1, 1, 1, 1], [nan, nan, nan, nan, 0.2, nan, 0.1, 0.3],
               [-1.0, -2.0, -1.0, -3.0] + [-1.0] * 4)
    q = 1 / (1 + math.exp(-(-1.0 + 3.0) / 5.0))
    assert c.tolist() == pytest.approx([0.5, 0.5, -q, -(1 - q), 0, 0, 0, 0], rel=1e-5)
    assert not torch.isnan(c).any()
