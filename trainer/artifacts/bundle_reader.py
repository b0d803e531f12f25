"""Opening a downloadable agent bundle (written by :func:`trainer.artifacts.bundle.export_bundle`) for
inference: every member's checksum verified, the policy rebuilt from safetensors and JSON only
(no pickle), the observation checked against the market data it is fed."""

from __future__ import annotations

import copy
import json
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainer.artifacts.checkpoints import refuse_nonfinite
from trainer.artifacts.ensemble import ENSEMBLE, ensemble_policy_from_config
from trainer.errors import BundleError, TrainerError, error_summary
from trainer.limits import DEFAULT_LIMITS, InputLimits, mib
from trainer.util.files import sha256_bytes

__all__ = ["BUNDLE_FORMAT", "BUNDLE_MEMBERS", "BUNDLE_VERSION", "LoadedAgent", "load_agent", "read_bundle"]

BUNDLE_FORMAT = "paddock.bundle"
BUNDLE_VERSION = 1
#: Members of a bundle zip; every one but ``SHA256SUMS`` is listed in ``SHA256SUMS``.
BUNDLE_MEMBERS = ("policy.safetensors", "config.json", "policy.onnx", "README.md", "SHA256SUMS")


def read_bundle(path: Path, limits: InputLimits = DEFAULT_LIMITS) -> dict[str, bytes]:
    """Read and verify every member of a bundle zip.

    The members' declared sizes are checked against ``limits.bundle_bytes`` before any is
    decompressed, and each member is read in 1 MiB chunks counted against the same cap (a
    zip whose headers understate a member is refused as soon as the cap is passed).

    Raises:
        BundleError: not a zip / truncated, a member missing, a CRC or SHA-256 mismatch, or
            members that decompress past ``limits.bundle_bytes``; the message names the bundle
            and the member, ``details`` has ``file`` and ``member`` (and ``field="bundle_bytes"``
            for the cap).
    """
    if not path.is_file():
        raise BundleError(f"bundle {path} does not exist", file=str(path))
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise BundleError(
            f"bundle {path} is not a readable zip file (truncated or corrupt): {error_summary(exc)}", file=str(path)
        ) from exc
    members: dict[str, bytes] = {}
    with zf:
        names = set(zf.namelist())
        for name in BUNDLE_MEMBERS:
            if name not in names:
                raise BundleError(
                    f"bundle {path}: {name} is missing (incomplete or truncated bundle)", file=str(path), member=name
                )
        declared = {name: zf.getinfo(name).file_size for name in BUNDLE_MEMBERS}
        if sum(declared.values()) > limits.bundle_bytes:
            biggest = max(declared, key=declared.__getitem__)
            raise BundleError(
                f"bundle {path}: its members hold {mib(sum(declared.values()))} once decompressed ({biggest}: "
                f"{mib(declared[biggest])}), more than {mib(limits.bundle_bytes)} (the limit)",
                file=str(path),
                member=biggest,
                field="bundle_bytes",
            )
        left = limits.bundle_bytes
        for name in BUNDLE_MEMBERS:
            members[name] = _read_member(zf, name, path, left, limits.bundle_bytes)
            left -= len(members[name])
    listed: dict[str, str] = {}
    for line in members["SHA256SUMS"].decode("utf-8", errors="replace").splitlines():
        parts = line.strip().split(maxsplit=1)
        if len(parts) == 2:
            listed[parts[1].lstrip("*")] = parts[0].lower()
    for name in BUNDLE_MEMBERS[:-1]:
        if name not in listed:
            raise BundleError(f"bundle {path}: SHA256SUMS does not list {name}", file=str(path), member="SHA256SUMS")
        if sha256_bytes(members[name]) != listed[name]:
            raise BundleError(
                f"bundle {path}: {name} does not match its SHA-256 in SHA256SUMS (modified or corrupt)",
                file=str(path),
                member=name,
            )
    return members


def _read_member(zf: zipfile.ZipFile, name: str, path: Path, cap: int, limit: int) -> bytes:
    """One member's bytes, read in chunks; refused once more than ``cap`` bytes (what is left
    of the bundle's ``limit``) came out.

    Raises:
        BundleError: the member is corrupt or decompresses past ``cap``.
    """
    parts: list[bytes] = []
    size = 0
    try:
        with zf.open(name) as f:
            while chunk := f.read(1 << 20):
                size += len(chunk)
                if size > cap:
                    raise BundleError(
                        f"bundle {path}: {name} decompresses to more than its zip header says, past the "
                        f"limit of {mib(limit)} for the whole bundle",
                        file=str(path),
                        member=name,
                        field="bundle_bytes",
                    )
                parts.append(chunk)
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as exc:
        raise BundleError(
            f"bundle {path}: {name} is corrupt ({error_summary(exc)})", file=str(path), member=name
        ) from exc
    return b"".join(parts)


class LoadedAgent:
    """A bundle's policy, ready for inference (no optimizer, no critic, no pickle).

    Attributes:
        config: the bundle's ``config.json`` as a dict.
        tickers: (N,) ticker symbols in action/observation order.
        feature_names: indicator names in observation order.
        observation_layout: the env's layout dict (see ``StockTradingVecEnv.observation_layout``).
        obs_dim, action_dim: sizes of one observation and one action.
        policy: the CPU ``torch.nn.Module`` (raw obs -> action), in eval mode.
    """

    def __init__(
        self, config: dict[str, Any], policy: torch.nn.Module, path: Path, device: torch.device | None = None
    ) -> None:
        self.config = config
        self.path = path
        self.tickers: tuple[str, ...] = tuple(config["tickers"])
        self.feature_names: tuple[str, ...] = tuple(config["indicators"])
        self.observation_layout: dict[str, Any] = config["observation_layout"]
        self.obs_dim = int(config["architecture"]["obs_dim"])
        self.action_dim = int(config["architecture"]["action_dim"])
        self.algorithm: str = config["algorithm"]
        self.policy = policy.eval()
        self._by_device: dict[str, torch.nn.Module] = {"cpu": self.policy}
        self.device = device or torch.device("cpu")
        self._policy_on(self.device)

    def __repr__(self) -> str:
        return f"LoadedAgent({self.algorithm}, {len(self.tickers)} tickers, obs_dim={self.obs_dim}, path={str(self.path)!r})"

    def _policy_on(self, device: torch.device) -> torch.nn.Module:
        key = str(device)
        if key not in self._by_device:
            self._by_device[key] = copy.deepcopy(self.policy).to(device).eval()
        return self._by_device[key]

    @torch.no_grad()
    def act(self, obs: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
        """Deterministic actions for a batch of raw observations.

        Args:
            obs: (B, obs_dim) or (obs_dim,) float observations built as the layout says
                (numpy array, or a torch tensor on any device).

        Returns:
            (B, action_dim) (or (action_dim,)) float32 actions in [-1, 1]: a numpy array for
            numpy input, a tensor on the input's device for tensor input.

        Raises:
            DataError: the last dimension is not ``obs_dim``.
        """
        from trainer.errors import DataError

        as_numpy = not isinstance(obs, torch.Tensor)
        x = torch.as_tensor(np.asarray(obs, dtype=np.float32)) if as_numpy else obs
        if x.ndim not in (1, 2) or x.shape[-1] != self.obs_dim:
            raise DataError(f"obs has shape {tuple(x.shape)}; this agent needs (batch, {self.obs_dim})", field="obs")
        single = x.ndim == 1
        x = x.to(torch.float32)
        out = self._policy_on(x.device)(x[None] if single else x)
        out = out[0] if single else out
        return out.cpu().numpy() if as_numpy else out

    def policy_fn(self, device: str | torch.device | None = None) -> Callable[[torch.Tensor], torch.Tensor]:
        """A callable obs (B, obs_dim) float32 tensor -> action (B, action_dim) tensor on ``device``.

        This is the policy signature of :func:`trainer.evaluation.evaluate_policy` and of the
        backtest engine.
        """
        target = torch.device(device) if device is not None else self.device
        module = self._policy_on(target)

        @torch.no_grad()
        def policy(obs: torch.Tensor) -> torch.Tensor:
            return module(obs.to(device=target, dtype=torch.float32))

        # the observation statistics travel with the policy, so a backtest of it needs no more
        policy.feature_stats = self.feature_stats  # type: ignore[attr-defined]
        return policy

    backtest_policy = policy_fn

    def env_config(self, **changes: Any) -> Any:
        """The trading rules the agent was trained with (``EnvConfig``), with ``changes``.

        Raises:
            ConfigError: a change is invalid (field ``env.<name>``).
        """
        from trainer.envs.kinds import config_class

        cls = config_class(self.config.get("kind", "stock_trading"))
        known = {f for f in cls.__dataclass_fields__}
        return cls.from_dict({**self.config["env_config"], **{k: v for k, v in changes.items() if k in known}})

    @property
    def kind(self) -> str:
        """``"stock_trading"`` or ``"portfolio"``."""
        return self.config.get("kind", "stock_trading")

    @property
    def feature_stats(self) -> Any:
        """The train split's z-score statistics (``FeatureStats``) or ``None`` (FinRL layout)."""
        from trainer.envs.observations import FeatureStats

        stats = self.config.get("feature_stats")
        return FeatureStats.from_dict(stats) if stats else None

    def prepare_market(self, market_data: Any) -> Any:
        """The panel this agent's env reads (scale-free features when it was trained on them);
        pass the whole history, then slice, so lookbacks reach before the first day."""
        from trainer.envs.kinds import prepare_market

        return prepare_market(market_data, self.env_config())

    def check_market(self, market_data: Any) -> None:
        """Raise DataError unless ``market_data`` has this agent's tickers and indicators, in order
        (for a scale-free agent: after :meth:`prepare_market`)."""
        from trainer.errors import DataError

        market_data = self.prepare_market(market_data)
        if tuple(market_data.tickers) != self.tickers:
            missing = [t for t in self.tickers if t not in market_data.tickers]
            raise DataError(
                "market data tickers differ from the agent's"
                + (f": missing {', '.join(missing)}" if missing else " (order or extra tickers)"),
                field="tickers",
                ticker=missing[0] if missing else None,
            )
        if tuple(market_data.feature_names) != self.feature_names:
            raise DataError(
                f"market data indicators {list(market_data.feature_names)} differ from the agent's {list(self.feature_names)}",
                field="indicators",
            )

    def make_env(
        self,
        market_data: Any,
        env_config: Any = None,
        *,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        seed: int = 0,
    ) -> Any:
        """The env (stock trading or portfolio) over ``market_data`` whose observations this agent reads.

        Args:
            market_data: a ``MarketData`` with the agent's tickers and indicators (e.g. the
                test split from :func:`trainer.data.load_market_data` with ``tickers`` set),
                passed through :meth:`prepare_market` first for a scale-free agent.
            env_config: trading rules; default the training rules with a fixed start (no
                random start, no random wealth) for backtests.
            num_envs, device, seed: as for the env.

        Raises:
            DataError: other tickers or indicators than the agent's.
        """
        from trainer.envs.kinds import make_env

        market_data = self.prepare_market(market_data)
        self.check_market(market_data)
        if env_config is None:
            env_config = self.env_config(random_start=False, randomize_initial=False, episode_length=None)
        return make_env(
            market_data, env_config, num_envs=num_envs, device=device, seed=seed, feature_stats=self.feature_stats
        )

    def evaluate(
        self, market_data: Any, env_config: Any = None, *, device: str | torch.device = "cpu", **kwargs: Any
    ) -> dict[str, Any]:
        """Metrics of the deterministic policy over ``market_data`` (see :func:`trainer.evaluation.evaluate_policy`)."""
        from trainer.evaluation import evaluate_policy

        market_data = self.prepare_market(market_data)
        self.check_market(market_data)
        env_config = env_config if env_config is not None else self.env_config()
        return evaluate_policy(
            self.policy_fn(device), market_data, env_config, device=device, feature_stats=self.feature_stats, **kwargs
        )


def load_agent(
    path: str | Path, *, device: str | torch.device = "cpu", limits: InputLimits = DEFAULT_LIMITS
) -> LoadedAgent:
    """Open an agent bundle written by :func:`export_bundle`, verifying every checksum.

    Only JSON (``config.json``) and safetensors (``policy.safetensors``) are parsed; the
    actor is rebuilt from the recorded algorithm, sizes and hyperparameters with Paddock's own
    classes, then its weights are loaded strictly (every tensor, exact shapes).

    Args:
        path: the bundle zip.
        device: device of the returned policy for tensor inputs (``act`` also follows the
            device of each input tensor).
        limits: the members may decompress to at most ``limits.bundle_bytes`` together.

    Returns:
        :class:`LoadedAgent`.

    Raises:
        BundleError: a missing, truncated, tampered or incompatible bundle, or one whose policy
            holds NaN or infinite parameters (a diverged agent); the message names the bundle
            file and the bad member (``details["member"]``).
    """
    from safetensors import SafetensorError
    from safetensors.torch import load as safetensors_load

    path = Path(path)
    members = read_bundle(path, limits)
    try:
        config = json.loads(members["config.json"].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(
            f"bundle {path}: config.json is not valid JSON ({exc})", file=str(path), member="config.json"
        ) from exc
    if not isinstance(config, dict) or config.get("format") != BUNDLE_FORMAT:
        raise BundleError(
            f"bundle {path}: config.json is not a Paddock bundle config", file=str(path), member="config.json"
        )
    if int(config.get("format_version", 0)) > BUNDLE_VERSION:
        raise BundleError(
            f"bundle {path}: format version {config['format_version']} is newer than this Paddock reads ({BUNDLE_VERSION})",
            file=str(path),
            member="config.json",
        )
    try:
        tensors = safetensors_load(members["policy.safetensors"])
    except (SafetensorError, ValueError, RuntimeError) as exc:
        raise BundleError(
            f"bundle {path}: policy.safetensors cannot be read ({error_summary(exc)})",
            file=str(path),
            member="policy.safetensors",
        ) from exc
    try:
        refuse_nonfinite(tensors, f"bundle {path}: policy.safetensors")
    except BundleError as exc:
        raise BundleError(exc.message, file=str(path), member="policy.safetensors") from None
    from trainer.agents import make_agent

    try:
        arch = config["architecture"]
        if config["algorithm"] == ENSEMBLE:
            policy = ensemble_policy_from_config(config, make_agent)
        else:
            agent = make_agent(
                config["algorithm"],
                int(arch["obs_dim"]),
                int(arch["action_dim"]),
                dict(config["hyperparameters"]),
                device="cpu",
                seed=0,
            )
            policy = agent.policy_module()
        policy = policy.to("cpu")
        policy.load_state_dict(tensors, strict=True)
    except (TrainerError, KeyError, RuntimeError, TypeError, ValueError) as exc:
        raise BundleError(
            f"bundle {path}: policy.safetensors does not fit the architecture in config.json ({error_summary(exc)})",
            file=str(path),
            member="policy.safetensors",
        ) from exc
    from trainer.util.device import pick_device

    return LoadedAgent(config, policy, path, pick_device(str(device)))
