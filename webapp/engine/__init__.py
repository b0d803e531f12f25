"""The one door between the web side and ``trainer``: calls it and converts types and errors.

Everything under ``webapp/`` imports this package, never ``trainer`` directly
(``tests/webapp/test_architecture.py`` enforces it); its modules are the only ones that do.
Trainer errors are turned into :class:`~webapp.core.errors.AppError` (HTTP 400 naming the
dotted field) where a user's input caused them; functions documented as raising
:class:`TrainerError` let it through, and callers catch it under that name from here. Results
come back as frozen dataclasses of plain types. Heavy trainer modules (torch) are imported
inside the functions that need them, so web processes that only validate input do not pay for
them at start-up.

- :mod:`.config_bounds`: the bounds of every setting, from the trainer's config classes;
- :mod:`.tasks`: task validation, algorithms and defaults, split and size checks, process setup;
- :mod:`.tournament`: parent choice, mutation, leaderboard pruning, the one-SE ensemble's members;
- :mod:`.market`: market files (inspect, download) and the per-process data cache;
- :mod:`.generations`: training one generation, the demo's throughput measurement;
- :mod:`.backtests`: backtests of stored agents, series metrics, bundle export;
- :mod:`.studies`: walk-forward studies: fold plans and the stitched out-of-sample record.
"""

# also the names the rest of webapp catches them by (Diverged is a TrainerError: catch it first)
from trainer.errors import Diverged as Diverged  # re-exported
from trainer.errors import TrainerError
from webapp.core.errors import register_trainer_error

register_trainer_error(TrainerError)

from webapp.engine.backtests import (  # noqa: E402 - after the error type is registered
    BENCHMARK_TICKER,
    AgentBacktest,
    backtest_agent,
    benchmark_path_for,
    benchmark_values,
    check_backtest_days,
    deflated_information_ratio,
    deflated_sharpe_ratio,
    export_bundle,
    series_metrics,
    withheld_metrics,
)
from webapp.engine.config_bounds import (  # noqa: E402
    bound_error,
    bound_text,
    env_bound_errors,
    env_bounds,
    env_kinds,
    seed_bound,
)
from webapp.engine.generations import (  # noqa: E402
    BuiltEnsemble,
    TrainedGeneration,
    build_ensemble,
    gate_text,
    measure_training_throughput,
    provenance,
    train_generation,
)
from webapp.engine.market import (  # noqa: E402
    MarketFiles,
    MembershipFile,
    check_members_chosen,
    check_membership,
    download_daily_bars,
    inspect_market_files,
    listed,
    loader_options,
    serve_act,
    survivorship_note,
)
from webapp.engine.studies import check_study_plan, plan_study_folds, stitch_study  # noqa: E402
from webapp.engine.task_specs import (  # noqa: E402
    algorithms,
    check_benchmark_coverage,
    check_generation_steps,
    check_run_device,
    check_task_data,
    check_window,
    clean_tickers,
    configure_process,
    default_algorithm,
    default_hyperparameters,
    demo_task,
    is_sticky_device_error,
    min_env_steps,
    parse_day,
    parse_moment,
    preload_trainer,
    range_bound,
    recommended_rebalance_band,
    resolve_device,
    selection_rule,
    split_errors,
    task_spec_dict,
    validate_hyperparameters,
    validate_task,
    worker_device_problem,
)
from webapp.engine.tournament import (  # noqa: E402
    ParentDecision,
    check_mutation,
    check_mutation_range,
    choose_parent,
    mutate_hyperparameters,
    one_se_member_ids,
    prune_leaderboard,
    score_se,
)

__all__ = [
    "BENCHMARK_TICKER",
    "AgentBacktest",
    "BuiltEnsemble",
    "MarketFiles",
    "MembershipFile",
    "ParentDecision",
    "TrainedGeneration",
    "Diverged",
    "TrainerError",
    "algorithms",
    "backtest_agent",
    "benchmark_path_for",
    "benchmark_values",
    "bound_error",
    "bound_text",
    "build_ensemble",
    "gate_text",
    "check_backtest_days",
    "check_generation_steps",
    "check_members_chosen",
    "check_membership",
    "check_mutation",
    "check_mutation_range",
    "check_run_device",
    "check_study_plan",
    "check_benchmark_coverage",
    "check_task_data",
    "check_window",
    "clean_tickers",
    "choose_parent",
    "configure_process",
    "default_algorithm",
    "default_hyperparameters",
    "deflated_information_ratio",
    "deflated_sharpe_ratio",
    "demo_task",
    "selection_rule",
    "download_daily_bars",
    "env_bound_errors",
    "env_bounds",
    "env_kinds",
    "export_bundle",
    "inspect_market_files",
    "listed",
    "loader_options",
    "measure_training_throughput",
    "min_env_steps",
    "mutate_hyperparameters",
    "one_se_member_ids",
    "parse_day",
    "parse_moment",
    "plan_study_folds",
    "range_bound",
    "preload_trainer",
    "recommended_rebalance_band",
    "prune_leaderboard",
    "score_se",
    "seed_bound",
    "resolve_device",
    "is_sticky_device_error",
    "worker_device_problem",
    "series_metrics",
    "serve_act",
    "provenance",
    "stitch_study",
    "survivorship_note",
    "train_generation",
    "validate_hyperparameters",
    "split_errors",
    "task_spec_dict",
    "validate_task",
    "withheld_metrics",
]
