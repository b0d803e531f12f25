"""GAE against advantages worked out by hand (gamma = lambda = 0.5 keeps the arithmetic short)."""

from __future__ import annotations

import pytest
import torch

from trainer.ops.gae import compute_gae

GAMMA = 0.5
LAM = 0.5  # gamma * lambda = 0.25


def _gae(rewards, values, last, terminated, truncated, final):
    return compute_gae(
        torch.tensor(rewards),
        torch.tensor(values),
        torch.tensor(last),
        torch.tensor(terminated),
        torch.tensor(truncated),
        torch.tensor(final),
        gamma=GAMMA,
        gae_lambda=LAM,
    )


def test_advantages_without_episode_ends_follow_the_recursion():
    # r = 1, 2, 3; V = 0.5, 1, 1.5; V(s_3) = 2
    # delta_0 = 1 + 0.5 * 1   - 0.5 = 1.0
    # delta_1 = 2 + 0.5 * 1.5 - 1   = 1.75
    # delta_2 = 3 + 0.5 * 2   - 1.5 = 2.5
    # A_2 = 2.5; A_1 = 1.75 + 0.25 * 2.5 = 2.375; A_0 = 1 + 0.25 * 2.375 = 1.59375
    adv, ret = _gae([[1.0], [2.0], [3.0]], [[0.5], [1.0], [1.5]], [2.0], [[False]] * 3, [[False]] * 3, [[0.0]] * 3)
    torch.testing.assert_close(adv[:, 0], torch.tensor([1.59375, 2.375, 2.5]))
    torch.testing.assert_close(ret[:, 0], torch.tensor([2.09375, 3.375, 4.0]))


def test_termination_stops_bootstrap_and_truncation_bootstraps_from_final_value():
    # Three envs, same rewards/values as above, an episode end at t = 1:
    #   env 0 terminated: next value at t=1 is 0, recursion cut after t=1
    #     delta_1 = 2 + 0 - 1 = 1.0; A_1 = 1.0; A_0 = 1 + 0.25 * 1.0 = 1.25; A_2 = 2.5
    #   env 1 truncated with V(final obs) = 4: delta_1 = 2 + 0.5 * 4 - 1 = 3.0; A_1 = 3.0
    #     A_0 = 1 + 0.25 * 3.0 = 1.75; A_2 = 2.5 (new episode, not propagated backwards)
    #   env 2 flagged both terminated and truncated: termination wins, same as env 0
    rewards = [[1.0] * 3, [2.0] * 3, [3.0] * 3]
    values = [[0.5] * 3, [1.0] * 3, [1.5] * 3]
    terminated = [[False] * 3, [True, False, True], [False] * 3]
    truncated = [[False] * 3, [False, True, True], [False] * 3]
    final = [[0.0] * 3, [4.0, 4.0, 4.0], [0.0] * 3]
    adv, ret = _gae(rewards, values, [2.0] * 3, terminated, truncated, final)
    torch.testing.assert_close(adv[:, 0], torch.tensor([1.25, 1.0, 2.5]))
    torch.testing.assert_close(adv[:, 1], torch.tensor([1.75, 3.0, 2.5]))
    torch.testing.assert_close(adv[:, 2], adv[:, 0])
    torch.testing.assert_close(ret, adv + torch.tensor(values))


def test_truncation_at_the_last_step_uses_final_value_not_the_next_rollout_obs():
    # env truncated at t = 1 (last step): V(s_2) = 100 belongs to the next episode and is ignored
    # delta_1 = 2 + 0.5 * 4 - 1 = 3.0; A_1 = 3.0; A_0 = 1 + 0.5 * 1 - 0.5 + 0.25 * 3 = 1.75
    adv, _ = _gae([[1.0], [2.0]], [[0.5], [1.0]], [100.0], [[False], [False]], [[False], [True]], [[0.0], [4.0]])
    torch.testing.assert_close(adv[:, 0], torch.tensor([1.75, 3.0]))


def test_lambda_one_gives_discounted_monte_carlo_return_minus_value():
    rewards = torch.tensor([[1.0], [1.0], [1.0]])
    values = torch.zeros(3, 1)
    adv, _ = compute_gae(
        rewards,
        values,
        torch.zeros(1),
        torch.zeros(3, 1, dtype=torch.bool),
        torch.zeros(3, 1, dtype=torch.bool),
        torch.zeros(3, 1),
        gamma=0.9,
        gae_lambda=1.0,
    )
    # G_0 = 1 + 0.9 + 0.81 = 2.71
    assert adv[0, 0].item() == pytest.approx(2.71)


def test_mismatched_shapes_are_rejected():
    with pytest.raises(ValueError, match="values"):
        compute_gae(
            torch.zeros(3, 2),
            torch.zeros(3, 1),
            torch.zeros(2),
            torch.zeros(3, 2, dtype=torch.bool),
            torch.zeros(3, 2, dtype=torch.bool),
            torch.zeros(3, 2),
            gamma=0.9,
            gae_lambda=0.9,
        )
