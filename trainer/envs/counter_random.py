"""Counter-based random numbers for the sync-free env steps: a pure function of (key, counter, index).

A ``torch.Generator`` cannot be traced by ``torch.compile`` (``fullgraph=True`` refuses it) and
must be registered with every CUDA graph that draws from it. The sync-free steps of the market
envs therefore draw their auto-reset numbers (start days, random initial wealth) from a hash of a
per-env-instance ``key`` (drawn once per ``reset`` from the env's own generator, so a seed still
fixes everything), a device-side ``counter`` (the step number, a 0-dim int64 tensor: no host
sync) and the element index. This is the counter-based idea of Salmon et al. (2011, "Parallel
random numbers: as easy as 1, 2, 3", SC'11), with a small integer mixer instead of Philox: each
round is ``x = ((x >> 16) ^ x) * 0x45D9F3B`` kept to 31 bits (products stay below 2**58, so int64
never overflows, on every backend and in compiled code alike).

The numbers are for start days and initial portfolios, not for statistics or cryptography.
"""

from __future__ import annotations

import torch

__all__ = ["MASK31", "counter_bits", "counter_randint", "counter_uniform"]

#: Numbers are 31-bit: ``0 <= x < 2**31``.
MASK31 = (1 << 31) - 1
_MIX = 0x45D9F3B
_GOLDEN = 0x1E3779B1  # 31-bit Weyl increment between streams


def _mix(x: torch.Tensor) -> torch.Tensor:
    for _ in range(3):
        x = torch.bitwise_xor(x >> 16, x).mul(_MIX).bitwise_and(MASK31)
    return torch.bitwise_xor(x >> 16, x)


def counter_bits(key: torch.Tensor, counter: torch.Tensor, stream: int, shape: tuple[int, ...]) -> torch.Tensor:
    """Uniform 31-bit integers, a pure function of ``(key, counter, stream, element index)``.

    Args:
        key: 0-dim int64 tensor in ``[0, 2**31)`` (the env's draw key, on the env's device).
        counter: 0-dim int64 tensor >= 0 (e.g. the step number; only its low 31 bits matter).
        stream: Python int, separates the draws of one step (start days, wealth, ...).
        shape: output shape.

    Returns:
        ``shape`` int64 tensor on ``key``'s device with values in ``[0, 2**31)``.
    """
    seed = _mix((key + (counter.bitwise_and(MASK31) * 2 + 1) * _GOLDEN + stream).bitwise_and(MASK31))
    numel = 1
    for size in shape:
        numel *= size
    index = torch.arange(numel, device=key.device, dtype=torch.int64).reshape(shape)
    return _mix((index * _GOLDEN + seed).bitwise_and(MASK31))


def counter_randint(
    high: int, key: torch.Tensor, counter: torch.Tensor, stream: int, shape: tuple[int, ...]
) -> torch.Tensor:
    """Integers uniform over ``[0, high)`` (``high`` < 2**31; bias below ``high / 2**31``).

    Returns:
        ``shape`` int64 tensor: ``(bits * high) >> 31``.
    """
    return (counter_bits(key, counter, stream, shape) * int(high)) >> 31


def counter_uniform(
    key: torch.Tensor, counter: torch.Tensor, stream: int, shape: tuple[int, ...], dtype: torch.dtype
) -> torch.Tensor:
    """Floats uniform over ``[0, 1)``: steps of ``2**-31``, or ``2**-24`` for dtypes of fewer bits.

    Returns:
        ``shape`` tensor of ``dtype``, never 1.0.
    """
    bits = counter_bits(key, counter, stream, shape)
    if dtype == torch.float64:
        return bits.to(dtype) * (2.0**-31)
    return (bits >> 7).to(dtype) * (2.0**-24)
