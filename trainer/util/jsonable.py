"""One conversion to plain JSON types, for anything the trainer hands out (checkpoint stats,
metrics, hyperparameters) and the web side stores."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["finite_or_none", "to_jsonable"]


def finite_or_none(value: Any) -> float | None:
    """``value`` as a float, or ``None`` when it is ``None``, NaN or infinite (JSON has neither).

    Raises:
        TypeError, ValueError: ``value`` is not a number.
    """
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def to_jsonable(value: Any) -> Any:
    """``value`` with plain JSON types only.

    Mappings become dicts with string keys, lists and tuples become lists, NumPy scalars and
    one-element tensors become Python numbers (larger tensors and arrays become nested lists),
    and NaN or infinite floats become ``None`` (JSON has no NaN). Anything else is returned as
    it is.
    """
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if hasattr(value, "detach") and hasattr(value, "numel"):  # a torch tensor, without importing torch
        value = value.detach().cpu()
        value = value.item() if value.numel() == 1 else value.tolist()
        return to_jsonable(value)
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
