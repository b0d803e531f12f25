"""Names of the RL algorithms the trainer builds, importable without torch (the web side lists
them in forms and the API schema before any training code loads).

:data:`trainer.agents.ALGORITHMS` maps each of these names to its agent and config classes;
``tests/trainer/agents/test_configs.py`` checks the two agree.
"""

from __future__ import annotations

#: In the order forms list them: ``ppo`` (Schulman et al. 2017, arXiv 1707.06347), ``a2c``
#: (Mnih et al. 2016, arXiv 1602.01783), ``sac`` (Haarnoja et al. 2018, arXiv 1801.01290),
#: ``td3`` (Fujimoto et al. 2018, arXiv 1802.09477), ``ddpg`` (Lillicrap et al. 2015,
#: arXiv 1509.02971) and ``direct`` (portfolio tasks only: gradients of the net log return
#: through the env's dynamics, Moody & Saffell 2001; Jiang, Xu & Liang 2017, arXiv 1706.10059).
ALGORITHM_NAMES: tuple[str, ...] = ("ppo", "a2c", "sac", "td3", "ddpg", "direct")
