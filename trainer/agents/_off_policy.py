"""The collect-and-update loop shared by the off-policy agents (SAC, TD3, DDPG).

Every vector env step adds E transitions to the agent's :class:`~trainer.buffers.replay.ReplayBuffer`
and is followed by ``updates_per_step`` gradient updates once the buffer holds
``max(learning_starts, batch_size)`` rows. Until the agent has collected ``learning_starts``
transitions it acts uniformly at random in [-1, 1]. The algorithms differ only in how they explore
(:meth:`OffPolicyAgent._explore`) and in one gradient update (:meth:`OffPolicyAgent._update`).
"""

from __future__ import annotations

import math
import time
from typing import Any, ClassVar

import torch

from trainer.agents._common import (
    MAX_NUM_ENVS,
    AgentBase,
    AgentConfig,
    ProgressFn,
    StopFn,
    TelemetryClock,
    TelemetryFn,
    Throttle,
    check_env,
    telemetry_due,
)
from trainer.buffers.rollout import finished_returns
from trainer.errors import ConfigError
from trainer.util.bounds import SCALE
from trainer.util.nonfinite import first_nonfinite, nonfinite_kind

#: Env steps whose finished-episode returns wait on the device before one host sync fetches
#: them (progress reports fetch them sooner).
DRAIN_EVERY = 64
#: Largest replay buffer, in transitions (4.2 M; 10.6 GB with 300-dim observations).
MAX_BUFFER_SIZE = 2**22
#: Largest minibatch of one gradient update.
MAX_BATCH_SIZE = 65_536
#: Most gradient updates after one vector env step.
MAX_UPDATES_PER_STEP = 64

__all__ = ["MAX_BATCH_SIZE", "MAX_BUFFER_SIZE", "MAX_UPDATES_PER_STEP", "OffPolicyAgent", "OffPolicyConfig"]


class OffPolicyConfig(AgentConfig):
    """The checks of the fields SAC's and TD3's configs share, in the order each ``validate``
    calls them (so the first impossible field is still the one named)."""

    def _check_replay_fields(self, learning_rates: tuple[str, ...]) -> None:
        """``num_envs``, ``hidden_sizes``, the ``learning_rates`` fields, ``batch_size``,
        ``buffer_size``, ``learning_starts``, ``updates_per_step``, ``gamma`` and ``tau``."""
        r = self._require
        r(1 <= self.num_envs <= MAX_NUM_ENVS, "num_envs", f"must be in [1, {MAX_NUM_ENVS}]")
        self._require_hidden_sizes()
        for name in learning_rates:
            value = getattr(self, name)
            r(math.isfinite(value) and value > 0, name, "must be > 0")
            self._require_within(SCALE, name)
        r(1 <= self.batch_size <= MAX_BATCH_SIZE, "batch_size", f"must be in [1, {MAX_BATCH_SIZE}]")
        r(self.buffer_size >= self.num_envs, "buffer_size", f"must be >= num_envs ({self.num_envs})")
        r(self.buffer_size <= MAX_BUFFER_SIZE, "buffer_size", f"must be <= {MAX_BUFFER_SIZE} (2**22)")
        if self.batch_size > self.buffer_size:
            # updates wait until the buffer holds batch_size transitions: they would never start
            raise ConfigError(
                f"{self.field_name('batch_size')}: batch_size {self.batch_size} is more than buffer_size "
                f"{self.buffer_size}: the replay buffer can never hold one batch, so no update would run; lower "
                "batch_size or raise buffer_size",
                field=self.field_name("batch_size"),
            )
        r(self.learning_starts >= 0, "learning_starts", "must be >= 0")
        r(
            1 <= self.updates_per_step <= MAX_UPDATES_PER_STEP,
            "updates_per_step",
            f"must be in [1, {MAX_UPDATES_PER_STEP}]",
        )
        r(0 < self.gamma <= 1, "gamma", "must be in (0, 1]")
        r(0 < self.tau <= 1, "tau", "must be in (0, 1]")

    def _check_observation_fields(self) -> None:
        """``obs_clip`` and ``reward_scale`` (more than 0, at most ``MAX_SCALE``)."""
        self._require(self.obs_clip > 0, "obs_clip", "must be > 0")
        self._require_within(SCALE, "obs_clip")
        self._require(math.isfinite(self.reward_scale) and self.reward_scale > 0, "reward_scale", "must be > 0")
        self._require_within(SCALE, "reward_scale")


class OffPolicyAgent(AgentBase):
    """Base of the replay-buffer agents: owns :meth:`learn`; subclasses add exploration and updates.

    Subclasses set ``LOSS_NAMES`` (the entries of the tensor :meth:`_update` returns) and own
    ``replay``, ``config`` (with ``num_envs``, ``buffer_size``, ``learning_starts``,
    ``batch_size``, ``updates_per_step``, ``reward_scale``) besides :class:`AgentBase`'s fields.
    """

    LOSS_NAMES: ClassVar[tuple[str, ...]]

    def _normalize(self, obs: torch.Tensor) -> torch.Tensor:
        return obs if self.obs_rms is None else self.obs_rms(obs)

    def _explore(self, obs: torch.Tensor) -> torch.Tensor:  # pragma: no cover - overridden
        """Behaviour actions (E, A) in [-1, 1] for normalised observations (E, obs_dim), no grad."""
        raise NotImplementedError

    def _update(self) -> torch.Tensor:  # pragma: no cover - overridden
        """One gradient update from a replay sample; returns detached losses (len(LOSS_NAMES),)."""
        raise NotImplementedError

    def learn(
        self,
        env: Any,
        env_steps: int,
        *,
        progress: ProgressFn | None = None,
        should_stop: StopFn | None = None,
        telemetry: TelemetryFn | None = None,
    ) -> dict[str, Any]:
        """Train for at least ``env_steps`` transitions (whole vector steps of E).

        The env is reset first with a seed drawn from the agent's generator, so learning in two
        calls equals learning in one call after a save/load with the replay buffer included.

        Args:
            env: vectorized env following ``docs/architecture.md`` on the agent's device.
            env_steps: transitions to collect, >= 0.
            progress: called at most ~4 times a second with ``env_steps`` (this call),
                ``total_env_steps``, ``steps_per_s``, ``episode_return_mean`` (last 100 finished
                episodes, unscaled, None before any) and the latest losses.
            should_stop: polled after every env step and its updates; when it returns true the
                call ends early with ``stats["cancelled"] = True``.
            telemetry: called after at most ``TELEMETRY_MAX_POINTS`` vector steps, evenly
                spread (:func:`~trainer.agents._common.telemetry_due`), and after the last one,
                with a point of :meth:`AgentBase._telemetry_point` holding the latest value of
                each of ``LOSS_NAMES`` (once updates have started) and ``learning_rate`` (the
                actor's).

        Returns:
            Stats dict: ``env_steps``, ``total_env_steps``, ``updates``, ``duration_s``,
            ``steps_per_s``, ``episode_return_mean``, ``episodes``, ``cancelled``, and the latest
            value of each of ``LOSS_NAMES`` once updates have started.

        Raises:
            ConfigError: the env's dimensions differ from the agent's, it has more envs than the
                replay capacity, or ``env_steps`` is negative.
            Diverged: an update's ``LOSS_NAMES`` entry is NaN or infinite (checked after each
                vector step's updates; on an accelerator flagged on the device and read only every
                ``DRAIN_EVERY`` steps, at progress and telemetry points and at the end, see
                :class:`_LossWatch`), or a parameter is (checked when progress is reported and at
                the end); the message names the first such update and quantity and the learning
                rates.
        """
        cfg = self.config
        check_env(env, self.obs_dim, self.action_dim, self.algorithm)
        if env.num_envs > cfg.buffer_size:
            raise ConfigError(
                f"{self.algorithm}.buffer_size {cfg.buffer_size} is smaller than env.num_envs {env.num_envs}",
                field=f"{self.algorithm}.buffer_size",
            )
        if env_steps < 0:
            raise ConfigError(f"env_steps must be >= 0, got {env_steps}", field="env_steps")
        num_envs = env.num_envs
        vector_steps = math.ceil(env_steps / num_envs)
        throttle = Throttle(progress)
        start = time.monotonic()
        clock = TelemetryClock(start)
        collected, episodes, cancelled = 0, 0, False
        last_losses: list[float] | None = None
        watch = _LossWatch(self.LOSS_NAMES, self.device)
        # (episode_return, done) of recent steps, kept on the device and moved to the host
        # together (one sync per DRAIN_EVERY steps or progress report, none per env step)
        pending_returns: list[tuple[torch.Tensor, torch.Tensor]] = []

        obs = self._reset_env(env)
        for step in range(vector_steps):
            if should_stop is not None and should_stop():
                cancelled = True
                break
            if self.obs_rms is not None:
                self.obs_rms.update(obs)
            with torch.no_grad():
                if self.env_steps < cfg.learning_starts:
                    action = (
                        torch.rand((num_envs, self.action_dim), device=self.device, generator=self.generator)
                        .mul_(2.0)
                        .sub_(1.0)
                    )
                else:
                    action = self._explore(self._normalize(obs))
            next_obs, reward, terminated, truncated, info = env.step(action)
            done = terminated | truncated
            real_next = torch.where(done[:, None], info["final_observation"], next_obs)
            self.replay.add(obs, action, reward * cfg.reward_scale, real_next, terminated)
            pending_returns.append((info["episode_return"], done))
            obs = next_obs
            collected += num_envs
            self.env_steps += num_envs

            if self.replay.size >= max(cfg.learning_starts, cfg.batch_size):
                rows = torch.stack([self._update() for _ in range(cfg.updates_per_step)])
                watch.add(rows, self.updates - len(rows) + 1)
            due = telemetry is not None and telemetry_due(step, vector_steps)
            if due or throttle.due() or len(pending_returns) >= DRAIN_EVERY or step == vector_steps - 1:
                watch.read()
            last_losses = watch.last
            if telemetry is not None and (watch.diverged or due):
                episodes += self._drain(pending_returns)
                values = dict(zip(self.LOSS_NAMES, last_losses)) if last_losses is not None else {}
                telemetry(self._telemetry_point(collected, clock, {**values, "learning_rate": cfg.actor_learning_rate}))
            self._raise_diverged(watch, collected, episodes, start, cancelled)
            if throttle.due():
                self._check_parameters(collected, episodes, start, last_losses, cancelled)
            if throttle.due() or len(pending_returns) >= DRAIN_EVERY:
                episodes += self._drain(pending_returns)
            if throttle.due():
                throttle(self._stats(collected, episodes, start, last_losses, cancelled))
        episodes += self._drain(pending_returns)
        watch.read()  # no-op unless cancelled before the last step's read
        self._raise_diverged(watch, collected, episodes, start, cancelled)
        last_losses = watch.last
        self._check_parameters(collected, episodes, start, last_losses, cancelled)
        return self._stats(collected, episodes, start, last_losses, cancelled)

    def _raise_diverged(self, watch: _LossWatch, collected: int, episodes: int, start: float, cancelled: bool) -> None:
        """Raise :class:`~trainer.errors.Diverged` for the first non-finite update ``watch`` has read."""
        if watch.diverged is not None:
            update, quantity, value = watch.diverged
            stats = self._stats(collected, episodes, start, watch.last, cancelled)
            raise self.divergence(update=update, quantity=quantity, value=value, stats=stats)

    def _learned_tensors(self) -> list[torch.Tensor]:
        """The tensors :meth:`_check_parameters` watches: actor and critic parameters."""
        return [*self.actor.parameters(), *self.critic.parameters()]

    def _check_parameters(self, *args: Any) -> None:
        """Raise :class:`~trainer.errors.Diverged` when a tensor of :meth:`_learned_tensors` is
        NaN or infinite (``args`` as for :meth:`_stats`). Per-update checks of the losses catch
        divergence first; this is the backstop."""
        tensors = self._learned_tensors()
        if bool(torch.stack([torch.isfinite(t).all() for t in tensors]).all()):
            return
        value = nonfinite_kind(tensors)
        raise self.divergence(update=self.updates, quantity="parameters", value=value, stats=self._stats(*args))

    def _drain(self, pending: list[tuple[torch.Tensor, torch.Tensor]]) -> int:
        """Move the finished episodes' returns of ``pending`` steps to ``recent_returns`` (one host
        sync), in step then env order; returns the count."""
        if not pending:
            return 0
        finished = finished_returns(torch.stack([r for r, _ in pending]), torch.stack([d for _, d in pending]))
        pending.clear()
        self.recent_returns.extend(finished)
        return len(finished)

    def _stats(
        self, collected: int, episodes: int, start: float, losses: list[float] | None, cancelled: bool
    ) -> dict[str, Any]:
        stats = self._base_stats(collected, episodes, start, cancelled)
        if losses is not None:
            stats.update(zip(self.LOSS_NAMES, losses))
        return stats


#: "No non-finite update yet" in :class:`_LossWatch`'s device flag (exact in float64).
_NONE = 2**62


class _LossWatch:
    """The per-update divergence check of the off-policy losses, without a host sync per update
    on an accelerator (issue 18).

    :meth:`add` takes each vector step's losses ``rows`` (U, len(names)) of updates
    ``first_update .. first_update + U - 1``. On the CPU it reads them at once (a host read costs
    nothing there). Elsewhere it keeps on the device the number of the first update with a
    non-finite entry (int64 scalar, ``_NONE`` when none), that update's row and the latest row;
    :meth:`read` moves the three to the host in one sync. After a read, ``last`` holds the latest
    losses (the diverged update's once one diverged) and ``diverged`` is
    ``(update, name, "NaN" | "inf" | "-inf")`` of the first non-finite update, else None.
    """

    def __init__(self, names: tuple[str, ...], device: torch.device) -> None:
        self.names = names
        self.on_host = device.type == "cpu"
        self.last: list[float] | None = None
        self.diverged: tuple[int, str, str] | None = None
        self._first_bad: torch.Tensor | None = None
        self._bad_row: torch.Tensor | None = None
        self._last_row: torch.Tensor | None = None
        self._unread = False

    def add(self, rows: torch.Tensor, first_update: int) -> None:
        if self.diverged is not None:
            return
        if self.on_host:
            self._check(rows.tolist(), first_update)
            return
        count = rows.shape[0]
        bad = ~torch.isfinite(rows).all(dim=1)
        numbers = torch.arange(first_update, first_update + count, device=rows.device)
        candidate = torch.where(bad, numbers, _NONE).amin()
        if self._first_bad is None:
            self._first_bad = torch.full((), _NONE, dtype=torch.int64, device=rows.device)
            self._bad_row = torch.zeros_like(rows[0])
        first = (self._first_bad == _NONE) & (candidate != _NONE)
        index = (candidate - first_update).clamp(0, count - 1).view(1)
        self._bad_row = torch.where(first, rows.index_select(0, index)[0], self._bad_row)
        self._first_bad = torch.minimum(self._first_bad, candidate)
        self._last_row = rows[-1]
        self._unread = True

    def read(self) -> None:
        """Fetch the device flag and rows (one host sync; none on the CPU or with nothing new)."""
        if not self._unread:
            return
        self._unread = False
        size = len(self.names)
        parts = (self._last_row, self._bad_row, self._first_bad.view(1))
        values = torch.cat([t.to(torch.float64) for t in parts]).tolist()
        first = int(values[-1])
        if first == _NONE:
            self.last = values[:size]
        else:
            self._check([values[size : 2 * size]], first)

    def _check(self, rows: list[list[float]], first_update: int) -> None:
        self.last = rows[-1]
        for i, row in enumerate(rows):
            bad = first_nonfinite(zip(self.names, row))
            if bad is not None:
                self.diverged, self.last = (first_update + i, *bad), row
                return
