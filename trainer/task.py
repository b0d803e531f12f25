"""What a run learns (:class:`TaskSpec`) and the checks a task must pass before training:
hyperparameters, buffer memory and the env steps of one generation.

A :class:`TaskSpec` fixes the market data, three consecutive date splits (train < validation
< test, no overlap), the kind of env with its rules, the algorithm with its hyperparameters
and the selection rule. Training uses only the train split; the score uses only the validation
split; the test split is left untouched for backtests.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainer.agents import ALGORITHMS, OFF_POLICY
from trainer.algorithms import DEFAULT_ALGORITHMS, default_algorithm
from trainer.data.sessions import panel_feature_names
from trainer.data.spec import DataSpec
from trainer.envs.kinds import DEFAULT_KIND, check_kind, env_config_from_dict, observation_dim
from trainer.envs.stock_config import EnvConfig
from trainer.errors import ConfigError
from trainer.selection import SelectionRule
from trainer.util.dates import parse_moment, range_bound

__all__ = [
    "MAX_BUFFER_BYTES",
    "SPLITS",
    "TaskSpec",
    "buffer_bytes",
    "check_buffer_memory",
    "check_env_steps",
    "min_env_steps",
    "reprefix",
    "validate_hyperparameters",
]

SPLITS = ("train", "validation", "test")
#: Largest rollout (PPO) or replay (SAC) buffer any task may ask for: 48 GiB, a third of the
#: largest GPUs (141 GB). Checked with :func:`buffer_bytes` when the task is created and the
#: observation size is known (the task names its tickers); the pod then checks the buffer
#: against the memory of the device it trains on (``trainer.util.device.buffer_memory_limit``: a
#: third of a GPU, a quarter of the CPU machine's RAM).
MAX_BUFFER_BYTES = 48 * 2**30


# ---------------------------------------------------------------------------- task spec
def reprefix(exc: ConfigError, prefix: str, inner: str | None = None) -> ConfigError:
    """Return ``exc`` about the same field under ``prefix`` (:meth:`TrainerError.under`).

    Args:
        exc: the error raised by a nested config class.
        prefix: e.g. ``"hyperparameters"``.
        inner: the nested class's own prefix to swap out (e.g. ``"ppo"`` for ``ppo.lr``).
    """
    name = str(exc.details.get("field") or "")
    if inner and (name == inner or name.startswith(inner + ".")):
        rest = name[len(inner) :].lstrip(".")
        return exc.under(f"{prefix}.{rest}" if rest else prefix)
    if name == prefix or name.startswith(prefix + "."):
        return exc
    return exc.under(f"{prefix}.{name}" if name else prefix)


def _parse_range(value: Any, name: str) -> tuple[str, str]:
    """Accept ``{"start": a, "end": b}`` or ``[a, b]``; return ``(a, b)`` validated, a <= b.

    Bounds are days ``YYYY-MM-DD`` or, for intraday data, exchange-time moments
    ``YYYY-MM-DD HH:MM`` (:func:`trainer.util.dates.parse_moment`; a day covers the whole day).
    """
    if isinstance(value, Mapping):
        unknown = set(value) - {"start", "end"}
        if unknown:
            key = sorted(unknown)[0]
            raise ConfigError(f"{name}.{key}: unknown field (expected start and end)", field=f"{name}.{key}")
        for key in ("start", "end"):
            if key not in value:
                raise ConfigError(f"{name}.{key} is required", field=f"{name}.{key}")
        start, end = value["start"], value["end"]
    elif isinstance(value, list | tuple) and len(value) == 2:
        start, end = value
    else:
        raise ConfigError(f"{name} must be {{start: YYYY-MM-DD, end: YYYY-MM-DD}}, got {value!r}", field=name)
    start = parse_moment(start, f"{name}.start")
    end = parse_moment(end, f"{name}.end")
    if range_bound(start, end=False) > range_bound(end, end=True):
        raise ConfigError(f"{name}.end: {end} is before {name}.start {start}", field=f"{name}.end")
    return start, end


def split_errors(splits: Mapping[str, Any]) -> dict[str, str]:
    """Every problem of the three splits at once, as ``{dotted field: message without the
    field's name}`` (``{}`` when they are fine): each split's own bounds and order, then the
    order of consecutive splits (train < validation < test, no overlap) where both parsed. :meth:`TaskSpec.from_dict`
    raises the first of these; a form that reports every error in one round reads them all.

    Args:
        splits: ``{"train": [start, end] or {"start", "end"}, "validation": ..., "test": ...}``
            with ``YYYY-MM-DD`` (or ``YYYY-MM-DD HH:MM``) inclusive bounds.
    """
    errors: dict[str, str] = {}
    ranges: dict[str, tuple[str, str]] = {}
    for name in SPLITS:
        if splits.get(name) is None:
            errors[name] = "required: [start, end]"
            continue
        try:
            ranges[name] = _parse_range(splits[name], name)
        except ConfigError as exc:
            field = str(exc.details.get("field") or name)
            errors[field] = str(exc).removeprefix(f"{field}: ")
    for earlier, later in (("train", "validation"), ("validation", "test")):
        if earlier in ranges and later in ranges:
            if range_bound(ranges[later][0], end=False) <= range_bound(ranges[earlier][1], end=True):
                errors.setdefault(
                    f"{later}.start",
                    f"{ranges[later][0]} must be after {earlier}.end {ranges[earlier][1]} "
                    "(splits are consecutive and do not overlap)",
                )
    return errors


@dataclass
class TaskSpec:
    """What a run learns: data, date splits, trading rules, algorithm and hyperparameters.

    Build it with :meth:`from_dict`, which validates everything; the constructor does not.

    Attributes:
        data: which files/tickers/indicators (see :class:`trainer.data.pipeline.DataSpec`).
        train: ``(start, end)`` ``YYYY-MM-DD`` inclusive (intraday data: also exchange-time
            ``YYYY-MM-DD HH:MM`` moments, see :func:`trainer.util.dates.parse_moment`); the agent
            learns on these days (bars) only.
        validation: ``(start, end)`` after ``train``; generations are scored on it.
        test: ``(start, end)`` after ``validation``; kept for backtests.
        env: rules of the env: an :class:`EnvConfig` (``kind="stock_trading"``) or a
            :class:`~trainer.envs.portfolio.PortfolioConfig` (``kind="portfolio"``).
        algorithm: a key of :data:`trainer.agents.ALGORITHMS` (``"ppo"``, ``"a2c"``, ``"sac"``,
            ``"td3"``, ``"ddpg"``, ``"direct"``); :meth:`from_dict` fills in the kind's default
            (:func:`trainer.algorithms.default_algorithm`) when a task names none.
        hyperparameters: the algorithm config's full dict (every field, defaults filled in),
            including ``num_envs`` and ``hidden_sizes``.
        kind: ``"stock_trading"`` or ``"portfolio"`` (:mod:`trainer.envs.kinds`).
        selection: how validation episodes are scored (:class:`trainer.selection.SelectionRule`).
    """

    data: DataSpec
    train: tuple[str, str]
    validation: tuple[str, str]
    test: tuple[str, str]
    env: EnvConfig = field(default_factory=EnvConfig)
    algorithm: str = DEFAULT_ALGORITHMS[DEFAULT_KIND]
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    kind: str = DEFAULT_KIND
    selection: SelectionRule = field(default_factory=SelectionRule)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, intraday: bool = False) -> TaskSpec:
        """Validate a JSON/YAML task and build the spec.

        Args:
            data: keys ``data`` (DataSpec dict, required), ``train``, ``validation``, ``test``
                (each ``{start, end}`` or ``[start, end]``, required), ``env`` (EnvConfig dict,
                default ``{}``), ``algorithm`` (missing or ``null``: the kind's default,
                :func:`trainer.algorithms.default_algorithm`: ``"direct"`` for a portfolio
                task, ``"ppo"`` for stock trading), ``hyperparameters``
                (default ``{}``), ``kind`` (default ``"stock_trading"``; ``env`` is read with the
                kind's config class), ``selection`` (a :class:`SelectionRule` dict, default
                mean - 1 x std of 4 sub-window Sharpe ratios).
            intraday: the data holds intraday bars (a dataset's interval, when the caller knows
                it): the buffer memory check then counts the 3 session features per ticker the
                panel will carry (:func:`trainer.data.sessions.panel_feature_names`). Training
                checks again with the loaded panel's own features.

        Raises:
            ConfigError: the first problem found, with ``details["field"]`` a dotted path such
                as ``"data.paths"``, ``"validation.start"``, ``"env.hmax"``,
                ``"hyperparameters.learning_rate"``; also when splits overlap or are out of
                order (train < validation < test), or lie outside ``data.start``/``data.end``;
                also when ``data.tickers`` is given and the agent's buffer would need more than
                :data:`MAX_BUFFER_BYTES` (:func:`check_buffer_memory`). Whether the splits hold
                enough trading days is checked when the data is loaded (:func:`run_generation`).
        """
        if not isinstance(data, Mapping):
            raise ConfigError("task must be an object", field="task")
        known = ("data", "train", "validation", "test", "env", "algorithm", "hyperparameters", "kind", "selection")
        for key in data:
            if key not in known:
                raise ConfigError(f"{key}: unknown task field (expected one of {', '.join(known)})", field=str(key))
        for key in ("data", *SPLITS):
            if key not in data or data[key] is None:
                raise ConfigError(f"{key} is required", field=key)
        try:
            spec = DataSpec.from_dict(
                dict(data["data"]) if isinstance(data["data"], Mapping) else data["data"], prefix="data"
            )
        except ConfigError as exc:
            raise reprefix(exc, "data") from None
        ranges = {name: _parse_range(data[name], name) for name in SPLITS}
        for earlier, later in (("train", "validation"), ("validation", "test")):
            if range_bound(ranges[later][0], end=False) <= range_bound(ranges[earlier][1], end=True):
                raise ConfigError(
                    f"{later}.start: {ranges[later][0]} must be after {earlier}.end {ranges[earlier][1]} "
                    f"(splits are consecutive and do not overlap)",
                    field=f"{later}.start",
                )
        if spec.start and ranges["train"][0][:10] < spec.start:
            raise ConfigError(
                f"train.start: {ranges['train'][0]} is before data.start {spec.start}", field="train.start"
            )
        if spec.end and ranges["test"][1][:10] > spec.end:
            raise ConfigError(f"test.end: {ranges['test'][1]} is after data.end {spec.end}", field="test.end")
        # Missing-data decisions (late listings, early ends, gaps) are judged against the
        # task's own range, train.start to test.end, never against the files' first row.
        spec.start = spec.start or ranges["train"][0][:10]  # the data range is whole days
        spec.end = spec.end or ranges["test"][1][:10]
        kind = check_kind(data.get("kind") or DEFAULT_KIND)
        selection = SelectionRule.from_dict(data.get("selection"))
        try:
            env = env_config_from_dict(kind, data.get("env"), prefix="env")
        except ConfigError as exc:
            raise reprefix(exc, "env") from None
        except TypeError as exc:  # e.g. a non-string key
            raise ConfigError(f"env: {exc}", field="env") from None
        algorithm = data.get("algorithm")
        if algorithm is None:  # the product default of the kind (docs/default-selection.md)
            algorithm = default_algorithm(kind)
        if not isinstance(algorithm, str) or algorithm.strip().lower() not in ALGORITHMS:
            raise ConfigError(
                f"algorithm: {algorithm!r} is not one of {', '.join(sorted(ALGORITHMS))}", field="algorithm"
            )
        algorithm = algorithm.strip().lower()
        given = data.get("hyperparameters") or {}
        if kind == "portfolio" and isinstance(given, Mapping) and "reward_scale" not in given:
            # the reward's own scale (RECOMMENDED_REWARD_SCALES), for an algorithm that has one
            from trainer.envs.portfolio_config import RECOMMENDED_REWARD_SCALES

            if "reward_scale" in validate_hyperparameters(algorithm, {}):
                given = {**given, "reward_scale": RECOMMENDED_REWARD_SCALES[env.reward]}
        hyperparameters = validate_hyperparameters(algorithm, given)
        try:
            ALGORITHMS[algorithm][1].from_dict(hyperparameters).check_task(
                kind=kind, env=env, num_tickers=len(spec.tickers) if spec.tickers is not None else None
            )
        except ConfigError as exc:  # "<algo>.<name>" is a hyperparameter; "algorithm" and "env.*" stay
            if not str(exc.details.get("field", "")).startswith(algorithm + "."):
                raise
            raise reprefix(exc, "hyperparameters", inner=algorithm) from None
        if spec.tickers is not None:  # else the observation size is known once the data is loaded
            n = len(spec.tickers)
            features = panel_feature_names(spec.indicators, intraday=intraday)
            obs_dim, action_dim = observation_dim(env, n, len(features))
            check_buffer_memory(algorithm, hyperparameters, obs_dim, action_dim)
        return cls(
            data=spec,
            train=ranges["train"],
            validation=ranges["validation"],
            test=ranges["test"],
            env=env,
            algorithm=algorithm,
            hyperparameters=hyperparameters,
            kind=kind,
            selection=selection,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict that :meth:`from_dict` accepts (splits as ``{start, end}``)."""
        out: dict[str, Any] = {"data": self.data.to_dict()}
        for name in SPLITS:
            start, end = getattr(self, name)
            out[name] = {"start": start, "end": end}
        out["env"] = self.env.to_dict()
        out["algorithm"] = self.algorithm
        out["hyperparameters"] = copy.deepcopy(self.hyperparameters)
        out["kind"] = self.kind
        out["selection"] = self.selection.to_dict()
        return out

    def split(self, name: str) -> tuple[str, str]:
        """``(start, end)`` of ``"train"``, ``"validation"`` or ``"test"``.

        Raises:
            ConfigError: an unknown split name (field ``split``).
        """
        if name not in SPLITS:
            raise ConfigError(f"split: {name!r} is not one of {', '.join(SPLITS)}", field="split")
        return getattr(self, name)


def validate_hyperparameters(algorithm: str, hyperparameters: Any) -> dict[str, Any]:
    """Validate hyperparameters with the algorithm's config class; return its full dict.

    Raises:
        ConfigError: unknown key or bad value, field ``"hyperparameters.<key>"``; unknown
            algorithm, field ``"algorithm"``.
    """
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"algorithm: {algorithm!r} is not one of {', '.join(sorted(ALGORITHMS))}", field="algorithm")
    config_cls = ALGORITHMS[algorithm][1]
    if not isinstance(hyperparameters, Mapping):
        raise ConfigError("hyperparameters must be an object", field="hyperparameters")
    try:
        return config_cls.from_dict(dict(hyperparameters)).to_dict()
    except ConfigError as exc:
        raise reprefix(exc, "hyperparameters", inner=algorithm) from None


def buffer_bytes(algorithm: str, hyperparameters: Mapping[str, Any], obs_dim: int, action_dim: int) -> int:
    """Bytes of the agent's largest allocation: an on-policy rollout buffer or a replay buffer.

    PPO and A2C store ``rollout_steps x num_envs`` transitions of obs, action and 8 float32
    scalars (log-prob, reward, value, final value, episode return, advantage, return, done
    flags); SAC, TD3 and DDPG (:data:`trainer.agents.OFF_POLICY`) store ``buffer_size``
    transitions of obs, next obs, action, reward and done (see :mod:`trainer.buffers`).
    Networks and activations come on top.

    Args:
        algorithm: a key of :data:`trainer.agents.ALGORITHMS`.
        hyperparameters: the algorithm's validated hyperparameter dict.
        obs_dim, action_dim: sizes of the env's observation and action vectors.
    """
    hp = hyperparameters
    if algorithm in OFF_POLICY:
        return int(hp["buffer_size"]) * (2 * obs_dim + action_dim + 2) * 4
    return int(hp["rollout_steps"]) * int(hp["num_envs"]) * (obs_dim + action_dim + 8) * 4


def check_buffer_memory(
    algorithm: str,
    hyperparameters: Mapping[str, Any],
    obs_dim: int,
    action_dim: int,
    *,
    limit: int | None = None,
) -> None:
    """Refuse hyperparameters whose buffer (:func:`buffer_bytes`) exceeds the limit.

    Args:
        limit: bytes allowed; default :data:`MAX_BUFFER_BYTES` (any device). A pod passes its
            device's :func:`trainer.util.device.buffer_memory_limit`.

    Raises:
        ConfigError: naming ``hyperparameters.buffer_size`` (off-policy) or ``hyperparameters.num_envs``
            (PPO, A2C: the buffer is ``rollout_steps x num_envs`` transitions).
    """
    size = buffer_bytes(algorithm, hyperparameters, obs_dim, action_dim)
    cap_bytes = min(MAX_BUFFER_BYTES, limit) if limit is not None else MAX_BUFFER_BYTES
    if size <= cap_bytes:
        return
    gib, cap = size / 2**30, round(cap_bytes / 2**30, 1)
    if algorithm in OFF_POLICY:
        raise ConfigError(
            f"hyperparameters.buffer_size: a replay buffer of {hyperparameters['buffer_size']} transitions of "
            f"{obs_dim}-dim observations needs {gib:.1f} GiB, more than the {cap:g} GiB allowed; make it smaller",
            field="hyperparameters.buffer_size",
        )
    raise ConfigError(
        f"hyperparameters.num_envs: a rollout of rollout_steps x num_envs = {hyperparameters['rollout_steps']} x "
        f"{hyperparameters['num_envs']} transitions of {obs_dim}-dim observations needs {gib:.1f} GiB, more than "
        f"the {cap:g} GiB allowed; lower num_envs or rollout_steps",
        field="hyperparameters.num_envs",
    )


def min_env_steps(algorithm: str, hyperparameters: Mapping[str, Any]) -> int:
    """Fewest env steps a generation can train: one PPO rollout (``num_envs x rollout_steps``)
    or one SAC vector step (``num_envs`` transitions)."""
    n = int(hyperparameters["num_envs"])
    return n if algorithm in OFF_POLICY else n * int(hyperparameters["rollout_steps"])


def check_env_steps(algorithm: str, hyperparameters: Mapping[str, Any], env_steps: int, *, field: str) -> None:
    """Refuse a generation budget smaller than :func:`min_env_steps`.

    Raises:
        ConfigError: naming ``field`` (e.g. ``"generation_steps"``).
    """
    need = min_env_steps(algorithm, hyperparameters)
    if env_steps < need:
        what = (
            f"one vector step of num_envs = {need}"
            if algorithm in OFF_POLICY
            else f"one rollout of num_envs x rollout_steps = {hyperparameters['num_envs']} x "
            f"{hyperparameters['rollout_steps']} = {need}"
        )
        raise ConfigError(f"{field}: {env_steps} env steps are less than {what}", field=field)
