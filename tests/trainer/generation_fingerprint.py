"""A fingerprint of what one PPO, one A2C and one SAC generation produce (issue 26).

Each algorithm trains a fresh agent for a few hundred env steps on three Dow-30 tickers, then a
child of it with a changed learning rate (the parent path of :func:`trainer.pod.run_generation`),
on the CPU with one torch thread and fixed seeds. The fingerprint is the SHA-256 of both
generations' checkpoint contents: the agent's state tensors (dtype, shape, bytes), the
hyperparameters, the metrics, the score, the counters, the observation layout, the feature
statistics and the data window; wall-clock values (``created_at``, ``steps_per_s``...) are left out.

The recorded values live in ``generation_fingerprints.json`` beside this file. They change only
when a generation's behaviour is meant to change; a refactoring must leave them as they are.
Regenerate them (after such an intended change, saying why in the commit) with::

    OMP_NUM_THREADS=1 .venv/bin/python -m tests.trainer.generation_fingerprint --write

Floating-point results can differ between CPU instruction sets (MKL/oneDNN kernels): the values
were measured on the project's x86-64 development machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

RECORD = Path(__file__).with_name("generation_fingerprints.json")
ALGORITHMS = ("ppo", "a2c", "sac")
TICKERS = ["AAPL", "MSFT", "JPM"]
SMALL = {
    "ppo": {"num_envs": 8, "rollout_steps": 8, "num_minibatches": 2, "update_epochs": 2, "hidden_sizes": [16, 16]},
    "a2c": {"num_envs": 8, "rollout_steps": 8, "hidden_sizes": [16, 16]},
    "sac": {"num_envs": 8, "hidden_sizes": [16, 16], "batch_size": 16, "learning_starts": 16, "buffer_size": 1024},
}
#: the child's hyperparameter change (the parent path: ``agent.set_hyperparameters``)
CHILD_CHANGE = {"ppo": {"learning_rate": 1e-4}, "a2c": {"learning_rate": 1e-4}, "sac": {"actor_learning_rate": 1e-4}}
ENV_STEPS = {"ppo": 256, "a2c": 256, "sac": 64}
NOTE = (
    "SHA-256 of a PPO, an A2C and a SAC generation (fresh + child), checked by "
    "tests/trainer/test_generation_fingerprint.py. They change only when a generation's behaviour is meant "
    "to change. Regenerate: OMP_NUM_THREADS=1 .venv/bin/python -m tests.trainer.generation_fingerprint --write "
    "(first measured on main d922c5a). Regenerated after issue 25's scores with standard errors: metrics gained "
    "score_se and score_se_source; with those two keys left out the hashes are the d922c5a ones (checked when "
    "regenerating). Regenerated after issue 25's cross-sectional actor: PPO's and A2C's "
    "hyperparameters gained policy and kappa; with those two keys left out the hashes are the previous ones "
    "(checked when regenerating)."
)
#: statistics that measure wall-clock time, not behaviour
TIMING_KEYS = {"steps_per_s", "elapsed_s", "duration_s", "sps", "seconds", "created_at", "eta_s"}


def task_dict(algorithm: str) -> dict[str, Any]:
    """The fingerprint's task: three Dow-30 tickers, a year of training, a quarter of validation."""
    return {
        "data": {
            "paths": ["dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz"],
            "tickers": list(TICKERS),
            "start": "2018-07-01",
            "end": "2019-12-31",
        },
        "train": {"start": "2018-07-01", "end": "2019-06-30"},
        "validation": {"start": "2019-07-01", "end": "2019-09-30"},
        "test": {"start": "2019-10-01", "end": "2019-12-31"},
        "env": {},
        "algorithm": algorithm,
        "hyperparameters": dict(SMALL[algorithm]),
    }


def _canonical(value: Any) -> Any:
    """``value`` as JSON-able data; a tensor or array becomes its dtype, shape and bytes' SHA-256."""
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        return {"tensor": str(t.dtype), "shape": list(t.shape), "sha256": hashlib.sha256(raw).hexdigest()}
    if isinstance(value, np.ndarray):
        a = np.ascontiguousarray(value)
        return {"array": str(a.dtype), "shape": list(a.shape), "sha256": hashlib.sha256(a.tobytes()).hexdigest()}
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items() if str(k) not in TIMING_KEYS}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float):
        return repr(value)  # exact, NaN and infinities included
    return value


def _digest_of_state(state: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "algorithm", "hyperparameters", "agent", "obs_dim", "action_dim", "observation_layout", "env_config",
        "kind", "feature_stats", "task", "data_window", "score", "metrics", "stats", "env_steps",
        "total_env_steps", "generation", "seed", "cancelled",
    )  # fmt: skip
    return {k: _canonical(state.get(k)) for k in keys}


def fingerprint(algorithm: str, data_dir: Path, cache_dir: Path) -> str:
    """The SHA-256 (hex) of a fresh generation of ``algorithm`` and of its child (see the module doc).

    Both load their data through :func:`~trainer.pod.run_generation` (``data_dir``, with the
    Parquet cache in ``cache_dir`` so that only the first load parses the CSV)."""
    from trainer.artifacts.checkpoints import load_checkpoint
    from trainer.pod import run_generation

    torch.set_num_threads(1)
    parts = []
    with tempfile.TemporaryDirectory(prefix="paddock-fingerprint-") as tmp:
        first = run_generation(
            task_dict(algorithm),
            env_steps=ENV_STEPS[algorithm],
            out_path=Path(tmp) / "g1.pt",
            seed=7,
            device="cpu",
            data_dir=data_dir,
            cache_dir=cache_dir,
        )
        child = run_generation(
            task_dict(algorithm),
            env_steps=ENV_STEPS[algorithm],
            out_path=Path(tmp) / "g2.pt",
            parent=first.checkpoint_path,
            hyperparameters=CHILD_CHANGE[algorithm],
            seed=8,
            device="cpu",
            data_dir=data_dir,
            cache_dir=cache_dir,
        )
        for result in (first, child):
            state = load_checkpoint(result.checkpoint_path)
            parts.append(
                {
                    "checkpoint": _digest_of_state(state),
                    "result": _canonical(
                        {
                            "score": result.score,
                            "metrics": result.metrics,
                            "hyperparameters": result.hyperparameters,
                            "env_steps": result.env_steps,
                            "total_env_steps": result.total_env_steps,
                            "generation": result.generation,
                            "cancelled": result.cancelled,
                            "telemetry_steps": [p.get("env_steps") for p in result.telemetry],
                        }
                    ),
                }
            )
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    from tests.conftest import DATA_DIR

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write the values to {RECORD.name}")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="paddock-fingerprint-cache-") as cache:
        measured = {a: fingerprint(a, DATA_DIR, Path(cache)) for a in ALGORITHMS}
    print(json.dumps(measured, indent=2))
    if args.write:
        record = {"_comment": NOTE, "fingerprints": measured}
        RECORD.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
