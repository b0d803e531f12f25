"""Tasks (what a run trains: data, splits, env, algorithm, hyperparameters), validated by the
trainer's config classes through :mod:`webapp.engine`. A task's ``TaskSpec`` dict is a read:
:func:`webapp.runs.selectors.runs.task_spec`."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from webapp import engine
from webapp.core.errors import AppError
from webapp.market.models import Dataset
from webapp.runs import bounds
from webapp.runs.algorithms import shared_hyperparameters
from webapp.runs.models import Task

SPLITS = ("train", "validation", "test")


def _split_path(name: str) -> str:
    """The trainer's split names (``test``, ``train.end``) as their path in the request body
    (``splits.test``, ``splits.train.end``), like every other field of the API's errors
    (``hyperparameters.learning_rate``, ``env.hmax``)."""
    return f"splits.{name}" if name.partition(".")[0] in SPLITS else name


def task_create(**kwargs: Any) -> Task:
    """Validate a task (:func:`task_prepare`, same arguments) and store it.

    Raises:
        AppError: as :func:`task_prepare`.
    """
    task = task_prepare(**kwargs)
    task.save()
    return task


def _checked_tickers(
    fields: dict[str, str], dataset: Dataset, tickers: list[str] | None
) -> tuple[list[str], bool, list[str]]:
    """``(tickers, named, unknown)``: the cleaned tickers a task names (all of the dataset's when
    ``None``), whether it named them, and those not in the dataset; problems go to ``fields["tickers"]``."""
    if tickers is not None and not [t for t in tickers if str(t).strip()]:
        fields["tickers"] = "choose at least one ticker, or leave the field out for all of the dataset's tickers"
        tickers = None
    named = tickers is not None
    if named:
        cleaned = bounds.collect(fields, engine.clean_tickers, [t for t in tickers if str(t).strip()])
        tickers = cleaned if cleaned is not None else []
    else:
        tickers = list(dataset.tickers)
    unknown = [t for t in tickers if t not in dataset.tickers]
    if unknown:
        fields["tickers"] = f"{engine.listed(unknown)} not in dataset {dataset.name!r}"
    return tickers, named, unknown


def _check_band(fields: dict[str, str], env: Any, traded: list[str]) -> None:
    """A portfolio task's no-trade band must be below 1/N of the tickers it trades, else a zero
    action never leaves the initial cash (``fields["env.rebalance_band"]``, unless already said)."""
    band = env.get("rebalance_band") if isinstance(env, dict) else None
    if not isinstance(band, int | float) or "env.rebalance_band" in fields or not traded:
        return
    if band >= 1.0 / len(traded):
        fields["env.rebalance_band"] = (
            f"must be below 1/N = {1.0 / len(traded):.4g} for {len(traded)} tickers, "
            f"else a zero action never leaves the initial cash (got {band:g})"
        )


def _check_flatten(fields: dict[str, str], env: Any, dataset: Dataset) -> None:
    """Flattening at the session close needs intraday bars (``fields["env.flatten_at_close"]``)."""
    if isinstance(env, dict) and env.get("flatten_at_close") is True and not dataset.intraday:
        fields["env.flatten_at_close"] = (
            f"flattening at the session close needs intraday bars; dataset {dataset.name!r} is daily"
        )


def _validated_task(
    owner, name: str, dataset: Dataset, spec: dict, decided: dict, allowed: list[str], overrides: dict
) -> Task:
    """The unsaved task of a spec whose fields each passed: what depends on several fields at once
    (``engine.validate_task``, errors at their body paths), the other allowed algorithms'
    complete hyperparameters, and the tickers and notes the data decided."""
    intraday = dataset.intraday  # the memory estimate counts the session features of intraday bars
    try:
        # what depends on several fields at once, on the tickers the data lets the task trade (a
        # direct learner's subset_size is checked against those, not against the dataset's list)
        traded = {**spec, "data": {**spec["data"], "tickers": list(decided["tickers"])}}
        normalized = engine.validate_task(traded, intraday=intraday)
    except AppError as exc:
        renamed = exc.with_paths(_split_path)
        if renamed is not exc:
            raise renamed from exc
        raise
    per_algorithm = {
        name: _other_algorithm_hyperparameters(
            traded, name, normalized["hyperparameters"], overrides.get(name, {}), intraday=intraday
        )
        for name in allowed[1:]
    }
    return Task(
        owner=owner,
        name=name,
        dataset=dataset,
        tickers=decided["tickers"],  # the tickers actually traded
        data_notes=[*dataset.notes, *decided["notes"]],
        splits={k: dict(normalized[k]) for k in ("train", "validation", "test")},
        env=normalized["env"],
        algorithm=normalized["algorithm"],
        hyperparameters=normalized["hyperparameters"],
        algorithms=allowed,
        algorithm_hyperparameters=per_algorithm,
        kind=normalized["kind"],
        selection=normalized["selection"],
    )


def _kind_defaults(kind: str, algorithm: str | None, env: Any) -> tuple[str, Any]:
    """The default configuration of a new task of ``kind`` where it names none: the kind's
    algorithm (``engine.default_algorithm``, docs/default-selection.md) and, for a portfolio
    task, the recommended no-trade band.

    Raises:
        AppError: an unknown kind (field ``kind``), when the algorithm is left out.
    """
    if algorithm is None:
        algorithm = engine.default_algorithm(kind)
    if kind == "portfolio" and isinstance(env, dict) and "rebalance_band" not in env:
        env = {**env, "rebalance_band": engine.recommended_rebalance_band()}
    return algorithm, env


def task_prepare(
    *,
    owner,
    dataset: Dataset,
    name: str,
    tickers: list[str] | None,
    splits: dict[str, list[str]],
    env: dict[str, Any] | None = None,
    algorithm: str | None = None,
    hyperparameters: dict[str, Any] | None = None,
    kind: str = "stock_trading",
    selection: dict[str, Any] | None = None,
    algorithms: list[str] | None = None,
    algorithm_hyperparameters: dict[str, dict[str, Any]] | None = None,
) -> Task:
    """A validated, unsaved task (checked with the trainer's config classes and its data).

    No transaction is open while it validates, and it writes nothing: reading the data files
    takes seconds, and on SQLite a transaction holds the database's one write lock from its
    start (``transaction_mode=IMMEDIATE``), so validating inside one made every other writer
    wait, and concurrent bad requests past the lock timeout answered 500 ("database is
    locked"). Callers save it inside their own short transaction (:func:`task_create`).

    Args:
        dataset: one of ``owner``'s datasets.
        tickers: a non-empty subset of the dataset's tickers (``None`` = all of them).
        splits: ``{"train": [start, end] or {"start", "end"}, "validation": ..., "test": ...}``,
            inclusive ``YYYY-MM-DD`` bounds (stored as ``{"start", "end"}``).
        env: fields of the kind's env config (stock trading: costs, hmax, initial cash...;
            portfolio: cost_pct, reward...), defaults for the rest; a portfolio task without a
            ``rebalance_band`` gets the recommended one (``engine.recommended_rebalance_band``).
        algorithm: a name of ``engine.algorithms()``; ``None``: the kind's default
            (``engine.default_algorithm``: ``"direct"`` for portfolio, ``"ppo"`` for stock
            trading; docs/default-selection.md), its default hyperparameters for those not given.
        hyperparameters: the algorithm's config fields, defaults for the rest.
        kind: ``"stock_trading"`` or ``"portfolio"``.
        selection: the validation scoring rule (``rule``, ``windows``, ``k``); ``{}`` = default.
        algorithms: the algorithms a run's fresh pods may train (a mixed tournament); it
            must contain ``algorithm``; ``None`` or ``[]`` = only ``algorithm``. See
            :func:`fresh_algorithm` for which pod trains which.
        algorithm_hyperparameters: ``{name: {hyperparameter: value}}`` for allowed algorithms
            other than ``algorithm``. Each of them trains with these values, the values of
            ``hyperparameters`` for the names it shares with ``algorithm`` (``num_envs``,
            ``gamma``, ``hidden_sizes``...) where not given here, and its defaults for the rest;
            the complete dicts are stored (``Task.algorithm_hyperparameters``), so later changes
            of the defaults do not change the task.

    Raises:
        AppError: naming the field by its path in the body (``tickers``, ``splits.validation``,
            ``splits.test.end``, ``env.hmax``,
            ``hyperparameters.learning_rate``, ``algorithm_hyperparameters.sac.tau``...).
    """
    if dataset.owner_id != owner.id:
        raise AppError("dataset not found", fields={"dataset": "not found"}, status=404)
    fields: dict[str, str] = {}
    tickers, named, unknown = _checked_tickers(fields, dataset, tickers)
    if not isinstance(splits, dict):
        raise AppError(
            'splits: an object {"train": [start, end], "validation": [...], "test": [...]} is required',
            fields={"splits": 'an object {"train": [start, end], "validation": [...], "test": [...]}'},
        )
    problems = {f"splits.{k}": "required: [start, end]" for k in SPLITS if k not in splits}
    problems |= {f"splits.{k}": f"not a split ({', '.join(SPLITS)})" for k in splits if k not in SPLITS}
    if problems:
        bounds.raise_all(problems)
    algorithm, env = _kind_defaults(kind, algorithm, env or {})
    hyperparameters = hyperparameters or {}
    _check_flatten(fields, env, dataset)
    spec = engine.task_spec_dict(
        data={"paths": dataset.source_paths(), "tickers": tickers, **dataset.data_options()},
        splits=splits,
        env=env,
        algorithm=algorithm,
        hyperparameters=hyperparameters,
        kind=kind,
        selection=selection,
    )
    # Every error at once: env bounds, each hyperparameter alone, then data and splits alone.
    if isinstance(env, dict):  # the trainer's bounds, every one at once
        fields.update(engine.env_bound_errors(kind, env))
    if isinstance(hyperparameters, dict):
        fields.update(bounds.hyperparameter_errors(algorithm, hyperparameters, engine.validate_hyperparameters))
    # each split's order and the order between them, all at once (validate_task names the first)
    split_problems = engine.split_errors({k: splits[k] for k in SPLITS})
    fields.update(split_problems)
    base = None
    if not split_problems:
        # data and splits alone (the tickers' count is judged with the task's own settings below)
        alone = {**spec, "env": {}, "hyperparameters": {}, "data": {**spec["data"], "tickers": None}}
        base = bounds.collect(fields, engine.validate_task, alone)
    allowed = _allowed_algorithms(fields, algorithms, algorithm, hyperparameters)
    overrides = _algorithm_overrides(fields, algorithm_hyperparameters, allowed)
    decided = None
    if base is not None and not unknown and not any(k.startswith("tickers") for k in fields):
        # the tickers actually traded over the task's range, and every data decision
        decided = bounds.collect(
            fields,
            engine.check_task_data,
            {k: base[k] for k in ("train", "validation", "test")},
            paths=dataset.source_paths(),
            tickers=tickers,
            named=named,
            file_names=dataset.file_names(),
            benchmark_path=settings.PADDOCK_BENCHMARK_FILE,
            intraday=dataset.intraday,
        )
    if decided is not None and kind == "portfolio":
        _check_band(fields, env, decided["tickers"])
    if decided is not None and dataset.membership and decided["tickers"]:
        bounds.collect(
            fields,
            engine.check_members_chosen,
            dataset.data_options()["membership"],
            name=dataset.membership_name or "the membership file",
            tickers=decided["tickers"],
            start=base["train"]["start"],
            end=base["test"]["end"],
        )
    bounds.raise_all({_split_path(name): why for name, why in fields.items()})
    return _validated_task(owner, name, dataset, spec, decided, allowed, overrides)


def _allowed_algorithms(fields: dict[str, str], algorithms: Any, algorithm: str, hyperparameters: Any) -> list[str]:
    """The normalized allowed list (``algorithm`` first, no repeats); errors go to ``fields["algorithms"]``."""
    if algorithms is None or algorithms == []:
        return [str(algorithm).strip().lower()]
    if not isinstance(algorithms, list | tuple) or not all(isinstance(a, str) for a in algorithms):
        fields["algorithms"] = "a list of algorithm names"
        return []
    names = list(dict.fromkeys(a.strip().lower() for a in algorithms))
    known = engine.algorithms()
    unknown = [a for a in names if a not in known]
    if unknown:
        fields["algorithms"] = f"{', '.join(map(repr, unknown))} not one of {', '.join(known)}"
        return []
    primary = str(algorithm).strip().lower()
    if primary not in names:
        fields["algorithms"] = f"must include the task's algorithm {primary!r} (its hyperparameters are set)"
        return []
    if isinstance(hyperparameters, dict) and "hyperparameters" not in fields:
        for name in names:
            if name != primary:
                try:
                    shared_hyperparameters(name, hyperparameters)
                except AppError as exc:
                    fields["algorithms"] = f"{name}: {exc.message}"
                    return []
    return [primary, *(a for a in names if a != primary)]


_OVERRIDES = "algorithm_hyperparameters"


def _algorithm_overrides(fields: dict[str, str], value: Any, allowed: list[str]) -> dict[str, dict[str, Any]]:
    """``algorithm_hyperparameters`` checked key by key (names lower-cased); errors go to
    ``fields`` as ``algorithm_hyperparameters``, ``algorithm_hyperparameters.<name>`` or
    ``algorithm_hyperparameters.<name>.<hyperparameter>``."""
    if value is None or value == {} or not allowed:  # no allowed list: its error is reported already
        return {}
    if not isinstance(value, dict):
        fields[_OVERRIDES] = 'an object {"sac": {"tau": 0.01}, ...} of the other algorithms\' settings'
        return {}
    out: dict[str, dict[str, Any]] = {}
    for raw_name, values in value.items():
        name = str(raw_name).strip().lower()
        field = f"{_OVERRIDES}.{name}"
        if name == allowed[0]:
            fields[field] = f"{name} is the task's algorithm: set its values in hyperparameters"
        elif name not in allowed:
            others = ", ".join(allowed[1:]) or "none: tick algorithms for a mixed tournament first"
            fields[field] = f"{name!r} is not one of the task's other algorithms ({others})"
        elif not isinstance(values, dict):
            fields[field] = f'an object of {name}\'s settings, e.g. {{"learning_rate": 0.001}}'
        else:
            errors = bounds.hyperparameter_errors(name, values, engine.validate_hyperparameters)
            fields.update({_as_override_field(name, key): message for key, message in errors.items()})
            out[name] = values
    return out


def _as_override_field(algorithm: str, field: str) -> str:
    """``hyperparameters.tau`` -> ``algorithm_hyperparameters.sac.tau`` (``hyperparameters`` alone
    -> ``algorithm_hyperparameters.sac``)."""
    head, _, rest = field.partition(".")
    if head != "hyperparameters":
        return field
    return f"{_OVERRIDES}.{algorithm}" + (f".{rest}" if rest else "")


def _other_algorithm_hyperparameters(
    spec: dict[str, Any], algorithm: str, primary: dict[str, Any], overrides: dict[str, Any], *, intraday: bool
) -> dict[str, Any]:
    """The complete hyperparameters of allowed algorithm ``algorithm``: ``overrides``, then the
    main algorithm's values of shared names, then defaults; checked as a whole task (buffer
    memory, sizes) with that algorithm.

    Raises:
        AppError: naming ``algorithm_hyperparameters.<algorithm>.<name>``.
    """
    merged = {**shared_hyperparameters(algorithm, primary), **overrides}
    try:
        task = {**spec, "algorithm": algorithm, "hyperparameters": merged}
        return engine.validate_task(task, intraday=intraday)["hyperparameters"]
    except AppError as exc:
        raise exc.with_paths(lambda name: _as_override_field(algorithm, name)) from None
