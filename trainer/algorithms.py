"""Names of the RL algorithms the trainer builds, importable without torch (the web side lists
them in forms and the API schema before any training code loads).

:data:`trainer.agents.ALGORITHMS` maps each of these names to its agent and config classes;
``tests/trainer/agents/test_configs.py`` checks the two agree.
"""

from __future__ import annotations

#: ``ppo`` (Schulman et al. 2017, arXiv 1707.06347), ``sac`` (Haarnoja et al. 2018, arXiv 1801.01290).
ALGORITHM_NAMES: tuple[str, ...] = ("ppo", "sac")
