"""The sync-free env step replayed as a CUDA graph (optional; CUDA only).

A CUDA graph records the kernels of one :meth:`step` once and replays them with one launch,
which removes the per-kernel launch cost (the step is ~60 small kernels; at 4,096 envs launch
overhead, not arithmetic, bounds it). Capture needs fixed addresses: the action is copied into a
static buffer, and every state tensor the step replaces (the env's ``GRAPH_STATE`` attributes)
is copied back into a static buffer at the end of the captured step, so each replay reads what
the previous one wrote. The sync-free step draws no numbers from a ``torch.Generator`` (its
auto-reset draws are counter-based, :mod:`trainer.envs.counter_random`), so there is no
generator state to register with the graph (``CUDAGraph.register_generator_state``).

Outputs are the graph's static tensors, overwritten by the next replay: clone what must
outlive a step (the agents copy observations into their rollout buffers anyway).
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["CudaGraphStep"]


class CudaGraphStep:
    """``env.step`` captured as one CUDA graph; call it like ``env.step``.

    Args:
        env: a sync-free market env (``env.sync_free`` true) on a CUDA device, with a
            ``GRAPH_STATE`` tuple of the attribute names its step replaces.
        warmup: eager steps on a side stream before the capture (allocator, lazy init); they
            advance the env like any step.

    Raises:
        ValueError: the env is not on CUDA or not sync-free.
    """

    def __init__(self, env: Any, warmup: int = 3) -> None:
        if env.device.type != "cuda" or not env.sync_free:
            raise ValueError("CudaGraphStep needs a sync-free env on a CUDA device")
        self.env = env
        self._action = torch.zeros((env.num_envs, env.action_dim), device=env.device)
        stream = torch.cuda.Stream(env.device)
        stream.wait_stream(torch.cuda.current_stream(env.device))
        with torch.cuda.stream(stream):
            for _ in range(warmup):
                env.step(self._action)
        torch.cuda.current_stream(env.device).wait_stream(stream)
        self._state = {name: getattr(env, name).clone() for name in env.GRAPH_STATE}
        self._bind()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._out = env.step(self._action)
            for name, buffer in self._state.items():
                buffer.copy_(getattr(env, name))
        self._bind()

    def _bind(self) -> None:
        for name, buffer in self._state.items():
            setattr(self.env, name, buffer)

    def __call__(self, action: torch.Tensor):
        """Replay the step on ``action`` (E, A); returns the step's tuple (static tensors)."""
        self._action.copy_(action)
        self.graph.replay()
        return self._out
