"""Paddock trainer: vectorized market envs, RL agents, pods, tournament policy, backtests.

Pure PyTorch/NumPy/pandas; it never imports Django, Celery or ``webapp``.
"""

from trainer.version import __version__

__all__ = ["__version__", "load_agent"]


def load_agent(path):
    """Load a downloadable agent bundle (zip) for inference; see :func:`trainer.artifacts.bundle_reader.load_agent`."""
    from trainer.artifacts.bundle_reader import load_agent as _load_agent

    return _load_agent(path)
