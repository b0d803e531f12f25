"""One-line help of each algorithm's hyperparameters, shown beside the run form's JSON field
(``{algorithm: {name: text}}``; DDPG is a TD3 configuration and shares TD3's entries)."""

from __future__ import annotations

# The actor settings PPO and A2C share (trainer.agents._on_policy).
_ACTOR = {
    "policy": "the actor: mlp, or cross_sectional (portfolio tasks only): one scorer shared by every ticker, "
    "exactly 1/N untrained, the same action for shuffled tickers; hidden_sizes are then its per-ticker widths. "
    "Fixed once the agent exists, never mutated",
    "kappa": "tilt bound of the cross_sectional actor (> 0, at most logit_scale / 2): weights stay within "
    "e^(2 kappa) of each other; fixed once the agent exists",
}

# The settings SAC and TD3 (and DDPG) share.
_OFF_POLICY = {
    "num_envs": "parallel envs per pod",
    "actor_learning_rate": "Adam step size of the actor (> 0, at most 1,000,000)",
    "critic_learning_rate": "Adam step size of the critics (> 0, at most 1,000,000)",
    "batch_size": "samples per gradient step",
    "buffer_size": "replay buffer capacity (transitions)",
    "learning_starts": "random-action steps before learning starts",
}

HYPERPARAMETER_HELP = {
    "ppo": {
        "num_envs": "parallel envs per pod; one rollout is rollout_steps x num_envs transitions",
        "rollout_steps": "steps per env and rollout",
        "hidden_sizes": "widths of the actor and critic MLPs",
        "learning_rate": "Adam step size (> 0, at most 1,000,000); mutated by the tournament when named in mutation bounds",
        "update_epochs": "passes over each rollout",
        "num_minibatches": "gradient steps per epoch",
        "gamma": "discount in (0, 1]",
        "gae_lambda": "GAE lambda in [0, 1]",
        "clip_coef": "PPO ratio clip (> 0, at most 1,000,000; 0.1-0.3 typical)",
        "ent_coef": "entropy bonus weight (0 to 1,000,000)",
        "reward_scale": "multiplies rewards; left out: 100 for a portfolio task's log-return rewards, else 1",
        **_ACTOR,
    },
    "sac": {
        **_OFF_POLICY,
        "gamma": "discount in (0, 1]",
        "tau": "target network soft-update rate",
        "initial_alpha": "initial entropy temperature (> 0, at most 1,000,000)",
    },
    "a2c": {
        "num_envs": "parallel envs per pod; one rollout is rollout_steps x num_envs transitions",
        "rollout_steps": "steps per env before each (single) gradient step",
        "hidden_sizes": "widths of the actor and critic MLPs",
        "learning_rate": "Adam step size (> 0, at most 1,000,000); mutated by the tournament when named in mutation bounds",
        "gamma": "discount in (0, 1]",
        "gae_lambda": "GAE lambda in [0, 1] (1 = n-step returns)",
        "ent_coef": "entropy bonus weight (0 to 1,000,000)",
        "vf_coef": "value-loss weight (0 to 1,000,000)",
        "reward_scale": "multiplies rewards; left out: 100 for a portfolio task's log-return rewards, else 1",
        **_ACTOR,
    },
    "td3": {
        **_OFF_POLICY,
        "exploration_noise": "std of the Gaussian action noise while collecting (0 to 10, action units)",
        "target_policy_noise": "std of the target smoothing noise (0 to 10; 0 = DDPG)",
        "policy_delay": "critic updates per actor update (1 = DDPG)",
        "twin_critics": "two critics and their minimum (false = DDPG's one critic)",
    },
}
HYPERPARAMETER_HELP["ddpg"] = HYPERPARAMETER_HELP["td3"]
HYPERPARAMETER_HELP["direct"] = {
    "num_envs": "windows per gradient step (portfolio tasks only); one step is num_envs x rollout_steps env steps",
    "rollout_steps": "window length in days (>= 2); gradients are truncated at the window's end",
    "subset_size": "tickers drawn per window (2..N); null: half the universe",
    "hidden_sizes": "widths of the shared per-ticker MLP",
    "kappa": "tilt bound (> 0, at most logit_scale / 2): weights stay within e^(2 kappa) of each other",
    "learning_rate": "AdamW step size (> 0, at most 1,000,000; learning_rate x weight_decay below 1); mutated by the tournament when named in mutation bounds",
    "weight_decay": "AdamW weight decay (0 to 1,000,000, and learning_rate x weight_decay below 1), a pull towards 1/N",
    "variance_penalty": "weight of the variance of daily net log returns (0 to 1,000,000)",
    "tracking_penalty": "weight of the variance of daily log returns over 1/N's (0 to 1,000,000)",
    "turnover_penalty": "weight of the mean daily turnover beyond the costs paid (0 to 1,000,000)",
    "challenger_alpha": "level (0..0.5) of the held-out test that lets an unpenalised challenger replace "
    "these penalties; 0 trains them alone",
    "challenger_kappa": "the challenger's tilt bound (> 0, at most logit_scale / 2)",
    "hold_equal_weight": "hold 1/N and train nothing (set on a line whose gate closed, when closed gates hold)",
}
