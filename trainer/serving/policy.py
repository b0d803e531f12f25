"""A bundle's ONNX policy in an onnxruntime session (:class:`ServedPolicy`) and an LRU of them
that reloads a changed bundle (:class:`PolicyCache`). No torch import."""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trainer.errors import BundleError
from trainer.limits import DEFAULT_LIMITS, InputLimits


@dataclass
class ServedPolicy:
    """A bundle's ONNX policy in an onnxruntime session, with the config needed to feed it.

    Attributes:
        path: the bundle zip.
        signature: ``(size, mtime_ns, inode)`` of the zip when it was loaded (a changed bundle
            is reloaded by :class:`PolicyCache`).
        config: the bundle's ``config.json``.
        session: ``onnxruntime.InferenceSession`` of ``policy.onnx`` (input ``obs`` (B,
            obs_dim) float32, output ``action`` (B, action_dim) float32).
    """

    path: Path
    signature: tuple[int, int, int]
    config: dict[str, Any]
    session: Any
    #: ``(raw MarketData, the panel the env reads)`` of the last dataset used (see :func:`_env_panel`)
    prepared: Any = None

    @classmethod
    def load(cls, path: str | Path, *, threads: int = 1, limits: InputLimits = DEFAULT_LIMITS) -> ServedPolicy:
        """Open a bundle, verify every checksum and start an onnxruntime session on the CPU.

        Args:
            path: bundle zip written by :func:`trainer.artifacts.bundle.export_bundle`.
            threads: onnxruntime intra-op threads (1: requests are small; parallelism comes
                from serving several requests at once).
            limits: the bundle's members may decompress to at most ``limits.bundle_bytes``.

        Raises:
            BundleError: missing, truncated or tampered bundle, one past ``limits``, or an ONNX
                graph onnxruntime cannot load.
        """
        import onnxruntime as ort

        from trainer.artifacts.bundle_reader import read_bundle

        path = Path(path)
        signature = _signature(path)
        members = read_bundle(path, limits)
        config = json.loads(members["config.json"].decode("utf-8"))
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        try:
            session = ort.InferenceSession(members["policy.onnx"], options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types
            raise BundleError(
                f"bundle {path}: policy.onnx cannot be loaded by onnxruntime ({exc})",
                file=str(path),
                member="policy.onnx",
            ) from exc
        return cls(path, signature, config, session)

    @property
    def obs_dim(self) -> int:
        return int(self.config["architecture"]["obs_dim"])

    @property
    def action_dim(self) -> int:
        return int(self.config["architecture"]["action_dim"])

    @property
    def tickers(self) -> list[str]:
        return list(self.config["tickers"])

    @property
    def kind(self) -> str:
        return str((self.config.get("task") or {}).get("kind", "stock_trading"))

    def act(self, observations: np.ndarray) -> np.ndarray:
        """Deterministic actions (B, action_dim) float32 in [-1, 1] for (B, obs_dim) float32 observations."""
        return self.session.run(None, {"obs": np.ascontiguousarray(observations, dtype=np.float32)})[0]


def _signature(path: Path) -> tuple[int, int, int]:
    try:
        st = os.stat(path)
    except OSError as exc:
        raise BundleError(f"bundle {path} does not exist", file=str(path)) from exc
    return (st.st_size, st.st_mtime_ns, st.st_ino)


class PolicyCache:
    """At most ``capacity`` loaded policies, least recently used evicted first; thread-safe.

    A policy is reloaded when its bundle file changed (size, mtime or inode) since it was
    loaded, or when it is asked for under another path.

    Args:
        capacity: sessions kept, >= 1 (each holds the policy's weights: ~100 kB for 64x64 MLPs).
        threads: onnxruntime intra-op threads of each session.
        limits: caps on each bundle's decompressed size (:class:`trainer.limits.InputLimits`).
    """

    def __init__(self, capacity: int = 32, *, threads: int = 1, limits: InputLimits = DEFAULT_LIMITS) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity, self.threads, self.limits = capacity, threads, limits
        self._items: OrderedDict[Any, ServedPolicy] = OrderedDict()
        self._lock = threading.Lock()
        self.loads = 0  # sessions created (a test and the benchmark read it)

    def get(self, key: Any, path: str | Path) -> ServedPolicy:
        """The policy of ``key`` (e.g. an agent id) whose bundle is ``path``, loading it if needed.

        Raises:
            BundleError: as :meth:`ServedPolicy.load`.
        """
        path = Path(path)
        with self._lock:
            policy = self._items.get(key)
            if policy is not None and policy.path == path and policy.signature == _signature(path):
                self._items.move_to_end(key)
                return policy
        policy = ServedPolicy.load(path, threads=self.threads, limits=self.limits)
        with self._lock:
            self.loads += 1
            self._items[key] = policy
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
        return policy

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Any) -> bool:
        return key in self._items
