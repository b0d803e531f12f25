"""Names of the RL algorithms the trainer builds, and which one a new task trains when it names
none; importable without torch (the web side lists them in forms and the API schema, and picks
a new task's default, before any training code loads).

:data:`trainer.agents.ALGORITHMS` maps each of these names to its agent and config classes;
``tests/trainer/agents/test_configs.py`` checks the two agree.
"""

from __future__ import annotations

from trainer.errors import ConfigError

__all__ = ["ALGORITHM_NAMES", "DEFAULT_ALGORITHMS", "default_algorithm"]

#: In the order forms list them: ``ppo`` (Schulman et al. 2017, arXiv 1707.06347), ``a2c``
#: (Mnih et al. 2016, arXiv 1602.01783), ``sac`` (Haarnoja et al. 2018, arXiv 1801.01290),
#: ``td3`` (Fujimoto et al. 2018, arXiv 1802.09477), ``ddpg`` (Lillicrap et al. 2015,
#: arXiv 1509.02971) and ``direct`` (portfolio tasks only: gradients of the net log return
#: through the env's dynamics, Moody & Saffell 2001; Jiang, Xu & Liang 2017, arXiv 1706.10059).
ALGORITHM_NAMES: tuple[str, ...] = ("ppo", "a2c", "sac", "td3", "ddpg", "direct")

#: The one source of a new task's algorithm when it names none, by task kind (the keys are
#: :data:`trainer.envs.kinds.KINDS`): the task file and ``TaskSpec.from_dict``, the CLI's
#: ``train`` and ``walk-forward``, the web form, ``POST /api/tasks/`` and the daily demo.
#:
#: ``portfolio``: ``direct`` with its defaults (:class:`trainer.agents.direct.DirectConfig`),
#: the configuration ``direct-conservative`` chosen by the rule of docs/default-selection.md
#: (fixed before any test span was read; no candidate was eligible, so its rule 4 applies).
#: ``stock_trading``: ``ppo``; no selection has compared algorithms on that task.
DEFAULT_ALGORITHMS: dict[str, str] = {"stock_trading": "ppo", "portfolio": "direct"}


def default_algorithm(kind: str, *, field: str = "kind") -> str:
    """The algorithm a new task of ``kind`` trains unless it names one (:data:`DEFAULT_ALGORITHMS`).

    Example: ``default_algorithm("portfolio") == "direct"``.

    Raises:
        ConfigError: ``kind`` is not a task kind (naming ``field``).
    """
    try:
        return DEFAULT_ALGORITHMS[kind]
    except (KeyError, TypeError):
        raise ConfigError(f"{field}: {kind!r} is not one of {', '.join(DEFAULT_ALGORITHMS)}", field=field) from None
