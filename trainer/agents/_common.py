"""Plumbing shared by the agents: config (de)serialisation, seeding, progress throttling."""

from __future__ import annotations

import dataclasses
import hashlib
import math
import time
import types
import typing
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar

import torch

from trainer.agents.networks import RunningMeanStd
from trainer.errors import ConfigError, Diverged
from trainer.util.bounds import Bound, format_number
from trainer.util.jsonable import finite_or_none
from trainer.util.nonfinite import labelled

ProgressFn = Callable[[dict], None]
StopFn = Callable[[], bool]
TelemetryFn = Callable[[dict], None]

#: Most telemetry points one ``learn`` call records (see :func:`telemetry_due`): enough for a
#: training curve per generation, few enough to store every generation of a long run.
TELEMETRY_MAX_POINTS = 50

# Upper bounds shared by the algorithm configs. They are far above anything that trains well on
# daily data and exist so that a typo (num_envs 100000000, a 100 000-wide layer) is a
# ConfigError naming the field instead of a 40 GB allocation that fails minutes later.
#: Most parallel envs per pod (2**16); ElegantRL-Podracer's GPU pods use 2**10-2**12.
MAX_NUM_ENVS = 65_536
#: Widest hidden layer; the first layer holds obs_dim x width weights (300 x 4096 = 1.2 M).
MAX_HIDDEN_SIZE = 4_096
#: Deepest MLP (hidden layers); 2-3 is usual for continuous control.
MAX_HIDDEN_LAYERS = 8


def _coerce(value: Any, hint: Any, field: str) -> Any:
    """Check ``value`` against a field's type hint and return it in canonical form.

    Accepted: ``bool``; ``int`` (also an integral float such as JSON's ``1e6``); ``float`` (ints
    too), finite only; ``str``; ``tuple[int, ...]`` from a list or tuple; ``X | None``.

    Raises:
        ConfigError: the value has the wrong type, or a float setting is NaN or infinite
            (``"ppo.learning_rate must be a finite number, got inf"``); ``field`` names it.
    """
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None:
            return None
        return _coerce(value, args[0], field)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{field} must be true or false, got {value!r}", field=field)
    if hint is int:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{field} must be an integer, got {value!r}", field=field)
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                number = float(value)
            except OverflowError:  # an integer of 309 digits or more
                number = math.inf
            if not math.isfinite(number):  # every float setting needs one; said once, here
                raise ConfigError(f"{field} must be a finite number, got {format_number(value)}", field=field)
            return number
        raise ConfigError(f"{field} must be a number, got {value!r}", field=field)
    if hint is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{field} must be a string, got {value!r}", field=field)
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{field} must be a list of integers, got {value!r}", field=field)
        return tuple(_coerce(v, int, field) for v in value)
    raise TypeError(f"unsupported config type {hint!r} for {field}")  # a bug in the config class


def restore_generator(generator: torch.Generator, state: torch.Tensor, saved_device_type: str | None = None) -> bool:
    """Restore a saved generator state, or reseed deterministically when it is from another device type.

    A ``torch.Generator``'s state depends on its device type: a CPU generator (Mersenne Twister)
    holds 5,056 bytes, a CUDA generator (Philox) 16 bytes (seed and offset), and neither accepts
    the other's (``set_state`` raises). A checkpoint trained on a GPU must still load on a CPU
    (export, evaluation, backtests, a CPU child of a GPU parent) and the reverse, so a state that
    does not fit ``generator`` seeds it with a hash of the saved bytes instead:
    :func:`reseed_from_state`.

    What "bit-exact resume" means: on the same device type the generator continues its stream
    exactly (``learn(N); learn(M)`` equals ``learn(N)``, save, load, ``learn(M)``). Across device
    types the networks, optimizer moments, normaliser and counters still load exactly, but the
    random stream is a new one, fixed by the saved state (the same checkpoint always gives the
    same stream on a given device type). Results across device types also differ by kernels
    (CUDA vs CPU floating point), so they are never bit-identical.

    Args:
        generator: the generator to restore (any device).
        state: the saved ``get_state()`` value, a uint8 CPU tensor.
        saved_device_type: the device type the state came from (``"cpu"``, ``"cuda"``...);
            ``None`` for checkpoints that did not record it (the state's size decides).

    Returns:
        True when the state was restored as saved, False when the generator was reseeded.

    Raises:
        TypeError: ``state`` is not a uint8 tensor.
    """
    if not isinstance(state, torch.Tensor) or state.dtype != torch.uint8:
        raise TypeError(f"generator state must be a uint8 tensor, got {type(state).__name__}")
    same_type = saved_device_type in (None, generator.device.type)
    if same_type and state.numel() == generator.get_state().numel():
        generator.set_state(state.cpu())
        return True
    generator.manual_seed(reseed_from_state(state, saved_device_type))
    return False


def reseed_from_state(state: torch.Tensor, saved_device_type: str | None = None) -> int:
    """The seed :func:`restore_generator` uses for a state from another device type.

    SHA-256 of ``"paddock-generator/<device type>/"`` and the state's bytes; the first 8 bytes
    of the digest, little-endian, shifted right by one (a non-negative 63-bit integer).
    """
    digest = hashlib.sha256(f"paddock-generator/{saved_device_type or 'unknown'}/".encode())
    digest.update(state.detach().cpu().contiguous().numpy().tobytes())
    return int.from_bytes(digest.digest()[:8], "little") >> 1


class AgentConfig:
    """Mixin for the algorithm config dataclasses: ``to_dict``/``from_dict``/``replace``.

    Subclasses set ``algorithm`` (the field prefix in errors, e.g. ``"ppo"``) and implement
    ``validate()``.
    """

    algorithm: ClassVar[str] = ""

    def field_name(self, name: str) -> str:
        """Dotted error path of a field, e.g. ``"ppo.learning_rate"``."""
        return f"{self.algorithm}.{name}"

    def validate(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def check_task(self, *, kind: str, env: Any, num_tickers: int | None) -> None:
        """Refuse a task this algorithm cannot train (every algorithm trains every kind unless
        it overrides this).

        Args:
            kind: the task's kind (``"stock_trading"``, ``"portfolio"``).
            env: the task's validated env config.
            num_tickers: the universe size when the task names its tickers, else None.

        Raises:
            ConfigError: naming the field (``algorithm`` or ``<algo>.<name>``).
        """

    def _require_hidden_sizes(self, name: str = "hidden_sizes") -> None:
        """Field ``name``: 1 to :data:`MAX_HIDDEN_LAYERS` layers, each 1 to :data:`MAX_HIDDEN_SIZE` wide."""
        sizes = getattr(self, name)
        self._require(1 <= len(sizes) <= MAX_HIDDEN_LAYERS, name, f"must list 1 to {MAX_HIDDEN_LAYERS} layer widths")
        self._require(all(1 <= h <= MAX_HIDDEN_SIZE for h in sizes), name, f"must be in [1, {MAX_HIDDEN_SIZE}] each")

    def _require_within(self, bound: Bound, *names: str) -> None:
        """Each field of ``names`` within ``bound`` (:mod:`trainer.util.bounds`), the error saying
        the whole range (``"ppo.ent_coef must be at least 0 and at most 1,000,000, got 1e+300"``).
        A ``None`` (a setting that is off) is left to the field's own check."""
        for name in names:
            value = getattr(self, name)
            self._require(value is None or bound.error(value) is None, name, f"must be {bound.text(words=True)}")

    def _require(self, ok: bool, name: str, message: str) -> None:
        """Raise ``ConfigError`` for field ``name`` unless ``ok``."""
        if not ok:
            value = getattr(self, name)
            raise ConfigError(f"{self.field_name(name)} {message}, got {value!r}", field=self.field_name(name))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict of every field (tuples become lists)."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):
        """Build and validate a config; missing keys keep their defaults.

        Raises:
            ConfigError: ``data`` is not a mapping, has an unknown key, a value of the wrong
                type or an impossible value; ``details["field"]`` names it (``"ppo.<key>"``).
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"{cls.algorithm} hyperparameters must be an object", field=cls.algorithm)
        hints = typing.get_type_hints(cls)
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {}
        for key, value in data.items():
            field = f"{cls.algorithm}.{key}"
            if key not in names:
                known = ", ".join(sorted(names))
                raise ConfigError(f"unknown hyperparameter {field} ({cls.algorithm} has: {known})", field=field)
            kwargs[key] = _coerce(value, hints[key], field)
        config = cls(**kwargs)
        config.validate()
        return config

    def replace(self, **changes: Any):
        """A validated copy with ``changes`` applied (same checks as :meth:`from_dict`)."""
        return type(self).from_dict({**self.to_dict(), **changes})


@contextmanager
def seeded_init(seed: int) -> Iterator[None]:
    """Seed the global CPU RNG for network initialisation without disturbing the caller's RNG."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def check_env(env: Any, obs_dim: int, action_dim: int, algorithm: str) -> None:
    """Raise ``ConfigError`` when the env's spaces differ from the agent's."""
    if env.obs_dim != obs_dim or env.action_dim != action_dim:
        raise ConfigError(
            f"env has obs_dim={env.obs_dim}, action_dim={env.action_dim} but the {algorithm} agent was built "
            f"for obs_dim={obs_dim}, action_dim={action_dim}",
            field="env",
        )


class Throttle:
    """Calls ``progress`` at most once per ``interval_s`` seconds (default 0.25 s = 4 per second)."""

    def __init__(self, progress: ProgressFn | None, interval_s: float = 0.25) -> None:
        self.progress = progress
        self.interval_s = interval_s
        self._last = -float("inf")

    def due(self) -> bool:
        """True when a callback exists and the interval has elapsed."""
        return self.progress is not None and time.monotonic() - self._last >= self.interval_s

    def __call__(self, payload: dict) -> None:
        if self.progress is not None:
            self._last = time.monotonic()
            self.progress(payload)


def telemetry_due(index: int, total: int, max_points: int = TELEMETRY_MAX_POINTS) -> bool:
    """Whether iteration ``index`` (0-based) of ``total`` records a telemetry point.

    Every ``ceil(total / (max_points - 1))``-th iteration and the last one do, so one ``learn``
    call records at most ``max_points`` points, evenly spread over its env steps, whatever its
    length (a 3-rollout generation records 3, a 1,000-rollout one 50).

    Raises:
        ValueError: ``max_points`` < 2.
    """
    if max_points < 2:
        raise ValueError(f"max_points must be >= 2, got {max_points}")
    stride = max(1, -(-total // (max_points - 1)))
    return (index + 1) % stride == 0 or index == total - 1


class TelemetryClock:
    """Env steps per second between consecutive telemetry points (wall clock, ``time.monotonic``)."""

    def __init__(self, start: float) -> None:
        self.start = start
        self._last_time = start
        self._last_steps = 0

    def point(self, collected: int) -> dict[str, float]:
        """``elapsed_s`` since ``learn`` started and ``steps_per_s`` since the previous point."""
        now = time.monotonic()
        dt = now - self._last_time
        rate = (collected - self._last_steps) / dt if dt > 0 else 0.0
        self._last_time, self._last_steps = now, collected
        return {"elapsed_s": now - self.start, "steps_per_s": rate}


def make_adam(params: Any, lr: float, device: torch.device) -> torch.optim.Adam:
    """``torch.optim.Adam`` for the agents' networks: fused (one kernel per step for all
    parameters instead of a few per tensor) on CUDA, PyTorch's default implementation elsewhere."""
    return torch.optim.Adam(params, lr=lr, fused=True if device.type == "cuda" else None)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set the learning rate of every param group (PBT mutation)."""
    for group in optimizer.param_groups:
        group["lr"] = lr


#: How a divergence report names a statistic (others: underscores become spaces).
_QUANTITY_NAMES = {
    "grad_norm": "gradient norm",
    "actor_grad_norm": "actor gradient norm",
    "critic_grad_norm": "critic gradient norm",
    "approx_kl": "approximate KL",
    "parameters": "a parameter",
}


class AgentBase:
    """Bookkeeping shared by the agents: stats, hyperparameter changes, the common checkpoint part,
    divergence reports.

    Subclasses set ``algorithm``, ``config_class``, ``SHAPE_FIELDS`` (config fields a loaded
    state must share with the agent, because they shape its networks or buffers) and
    ``STEP_SIZE_FIELDS`` (the hyperparameters a divergence report names) and own ``config``,
    ``actor``, ``critic``, ``obs_rms`` (or None), ``generator``, ``env_steps``, ``updates`` and
    ``recent_returns``.
    """

    algorithm: ClassVar[str]
    config_class: ClassVar[type]
    SHAPE_FIELDS: ClassVar[tuple[str, ...]]
    STEP_SIZE_FIELDS: ClassVar[tuple[str, ...]]

    def _init_agent(
        self, obs_dim: int, action_dim: int, config: Any, device: str | torch.device, *, check_type: bool = False
    ) -> None:
        """Check the dimensions, validate ``config`` (``config_class()`` when None) and set
        ``config``, ``obs_dim``, ``action_dim`` and ``device``.

        Args:
            check_type: refuse a config that is not a ``config_class`` (TD3 and DDPG share a class).

        Raises:
            ConfigError: a dimension below 1 (field ``env``), a config of another class, or an
                impossible hyperparameter.
        """
        if obs_dim < 1 or action_dim < 1:
            raise ConfigError(f"obs_dim and action_dim must be >= 1, got {obs_dim}, {action_dim}", field="env")
        self.config = config if config is not None else self.config_class()
        if check_type and not isinstance(self.config, self.config_class):
            raise ConfigError(f"{self.algorithm} needs a {self.config_class.__name__}", field=self.algorithm)
        self.config.validate()
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.device = torch.device(device)

    def _make_normalizer(self) -> RunningMeanStd | None:
        """The running observation normalizer on the agent's device when the config asks for one
        (``normalize_observations``, clipped to ``obs_clip``), else None."""
        cfg = self.config
        return RunningMeanStd(self.obs_dim, clip=cfg.obs_clip).to(self.device) if cfg.normalize_observations else None

    def _init_counters(self, seed: int) -> None:
        """The agent's generator (seeded with ``seed``) and its life counters, all at zero."""
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self.env_steps = 0  # transitions collected over the agent's life
        self.updates = 0  # gradient steps over the agent's life
        self.recent_returns: deque[float] = deque(maxlen=100)

    def _reset_env(self, env: Any) -> torch.Tensor:
        """Reset ``env`` with a seed drawn from the agent's generator and return its first
        observations (E, obs_dim): what makes learning in two calls (or after a save and load)
        equal learning in one."""
        env_seed = int(torch.randint(0, 2**31 - 1, (1,), device=self.device, generator=self.generator).item())
        obs, _ = env.reset(seed=env_seed)
        return obs

    def divergence(self, *, update: int, quantity: str, value: str, stats: dict[str, Any]) -> Diverged:
        """The error of a divergence found after gradient step ``update`` (1-based, over the
        agent's life): ``"PPO diverged at update 37: policy loss is NaN; learning_rate=1000"``.

        Args:
            update: the agent's gradient step whose numbers first went non-finite.
            quantity: what went non-finite, e.g. ``"policy_loss"``, ``"grad_norm"``, ``"parameters"``.
            value: ``"NaN"``, ``"inf"`` or ``"-inf"``.
            stats: training statistics up to that point (see ``learn``), recorded in the error.
        """
        hp = {name: getattr(self.config, name) for name in self.STEP_SIZE_FIELDS}
        what = _QUANTITY_NAMES.get(quantity, quantity.replace("_", " "))
        settings = ", ".join(f"{k}={v:g}" for k, v in hp.items())
        message = f"{self.algorithm.upper()} diverged at update {update}: {what} is {value}; {settings}"
        return Diverged(
            message,
            algorithm=self.algorithm,
            update=update,
            quantity=quantity,
            value=value,
            hyperparameters=hp,
            stats=labelled(stats),
        )

    def _base_stats(self, collected: int, episodes: int, start: float, cancelled: bool) -> dict[str, Any]:
        """The stats every ``learn`` returns (losses are added by the caller)."""
        elapsed = time.monotonic() - start
        recent = list(self.recent_returns)
        return {
            "env_steps": collected,
            "total_env_steps": self.env_steps,
            "updates": self.updates,
            "duration_s": elapsed,
            "steps_per_s": collected / elapsed if elapsed > 0 else 0.0,
            "episode_return_mean": sum(recent) / len(recent) if recent else None,
            "episodes": episodes,
            "cancelled": cancelled,
        }

    def _telemetry_point(self, collected: int, clock: TelemetryClock, values: Mapping[str, float]) -> dict[str, Any]:
        """One telemetry point: ``env_steps`` (this call), ``total_env_steps`` (the agent's life),
        ``elapsed_s``, ``steps_per_s`` (since the previous point), ``episode_return_mean`` (last
        100 finished episodes, unscaled; None before any) and ``values`` (losses, learning
        rate...), NaN/inf as None."""
        recent = self.recent_returns
        point: dict[str, Any] = {
            "env_steps": collected,
            "total_env_steps": self.env_steps,
            **clock.point(collected),
            "episode_return_mean": sum(recent) / len(recent) if recent else None,
        }
        point.update({name: finite_or_none(v) for name, v in values.items()})
        return point

    def hyperparameters(self) -> dict[str, Any]:
        """The current config as a JSON-able dict."""
        return self.config.to_dict()

    def _changed_config(self, changes: dict[str, Any]):
        """The config with ``changes`` applied and validated.

        Raises:
            ConfigError: unknown key, bad value, or a field in ``config_class.FIXED`` (set at
                creation) given a different value.
        """
        config = self.config.replace(**changes)
        for name in self.config_class.FIXED:
            if getattr(config, name) != getattr(self.config, name):
                field = f"{self.algorithm}.{name}"
                raise ConfigError(f"{field} cannot change after the agent is created", field=field)
        return config

    def _common_state(self) -> dict[str, Any]:
        """The checkpoint entries every agent has (tensors and plain containers only)."""
        return {
            "algorithm": self.algorithm,
            "obs_dim": self.obs_dim,
            "action_dim": self.action_dim,
            "config": self.config.to_dict(),
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "obs_rms": self.obs_rms.state_dict() if self.obs_rms is not None else None,
            "generator": self.generator.get_state(),
            "generator_device": self.generator.device.type,
            "env_steps": self.env_steps,
            "updates": self.updates,
            "recent_returns": list(self.recent_returns),
        }

    def _load_common_state(self, state: dict[str, Any]) -> None:
        """Check a state fits this agent, then restore the entries of :meth:`_common_state`.

        A generator state saved on another device type (a GPU checkpoint loaded on a CPU, or
        the reverse) reseeds the generator deterministically: see :func:`restore_generator`.

        Raises:
            ConfigError: the state belongs to another algorithm, other dimensions or another
                value of a ``SHAPE_FIELDS`` field.
        """
        if state.get("algorithm") != self.algorithm:
            raise ConfigError(
                f"state is for algorithm {state.get('algorithm')!r}, not {self.algorithm}", field="algorithm"
            )
        if (state["obs_dim"], state["action_dim"]) != (self.obs_dim, self.action_dim):
            raise ConfigError("state has different obs_dim/action_dim", field="env")
        config = self.config_class.from_dict(state["config"])
        for name in self.SHAPE_FIELDS:
            if getattr(config, name) != getattr(self.config, name):
                field = f"{self.algorithm}.{name}"
                raise ConfigError(f"state has a different {field}", field=field)
        self.config = config
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        if self.obs_rms is not None and state["obs_rms"] is not None:
            self.obs_rms.load_state_dict(state["obs_rms"])
        restore_generator(self.generator, state["generator"], state.get("generator_device"))
        self.env_steps = int(state["env_steps"])
        self.updates = int(state["updates"])
        self.recent_returns = deque((float(x) for x in state["recent_returns"]), maxlen=self.recent_returns.maxlen)
