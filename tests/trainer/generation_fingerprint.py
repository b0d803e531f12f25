"""A fingerprint of what one PPO, one A2C and one SAC generation produce (issue 26).

Each algorithm trains a fresh agent for a few hundred env steps on three Dow-30 tickers, then a
child of it with a changed learning rate (the parent path of :func:`trainer.pod.run_generation`),
on the CPU with one torch thread and fixed seeds. The fingerprint covers both generations'
checkpoint contents: the agent's state tensors, the hyperparameters, the metrics, the score, the
counters, the observation layout, the feature statistics and the data window; wall-clock values
(``created_at``, ``steps_per_s``...) are left out. It has two parts:

- ``structure``: everything but the floating-point values, by path: keys, dtypes, shapes,
  integers, strings, and the SHA-256 of the bytes of integer tensors (random-generator states,
  counters). It must match exactly; a mismatch names the paths. The data window's
  ``content_sha256`` is left out: it hashes the float arrays of prices, indicators and turbulence,
  whose last bits follow the CPU's vector kernels as the numbers do (the same commit gave another
  structure on the AMD machine of 2026-12-04 than on the one that recorded it).
- ``numbers``: each floating-point value by its path (a float tensor by the sum, the sum of
  absolute values and the sum of squares of its elements, in float64). They must match within
  :data:`RTOL`, because floating-point results differ with the CPU's vector kernels (torch's
  AVX-512 / AVX2 / scalar paths, MKL's dispatch): the same commit gives other bits on another
  machine, so bit-identity would fail there without any change of behaviour.

The recorded values live in ``generation_fingerprints.json`` beside this file. They change only
when a generation's behaviour is meant to change; a refactoring must leave them as they are.
Regenerate them (after such an intended change, saying why in the commit) with::

    OMP_NUM_THREADS=1 .venv/bin/python -m tests.trainer.generation_fingerprint --write
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
    "A PPO, an A2C and a SAC generation (fresh + child): their structure (by path) and their floating-point "
    "numbers, checked by "
    "tests/trainer/test_generation_fingerprint.py. They change only when a generation's behaviour is meant "
    "to change. Regenerate: OMP_NUM_THREADS=1 .venv/bin/python -m tests.trainer.generation_fingerprint --write "
    "(first measured on main d922c5a). Regenerated after issue 25's scores with standard errors: metrics gained "
    "score_se and score_se_source; with those two keys left out the hashes are the d922c5a ones (checked when "
    "regenerating). Regenerated after issue 25's cross-sectional actor: PPO's and A2C's "
    "hyperparameters gained policy and kappa; with those two keys left out the hashes are the previous ones "
    "(checked when regenerating). Split into structure and numbers on 2026-12-03: the bit-exact hashes differed "
    "between the x86-64 machines of two sessions (and between torch's AVX-512, AVX2 and scalar kernels of one) "
    "with no change of behaviour; the numbers are compared within RTOL. Regenerated on 2026-12-04 with the "
    "structure kept by path (a mismatch names the paths) and the data window's content_sha256 (a hash of float "
    "arrays) left out: on that day's AMD machine main 5f8e728 and the recording commit fbf7af3 both gave another "
    "structure hash than the record, with every number within RTOL."
)
#: statistics that measure wall-clock time, not behaviour
TIMING_KEYS = {"steps_per_s", "elapsed_s", "duration_s", "sps", "seconds", "created_at", "eta_s"}
#: hashes of floating-point content, machine-dependent in their last bits (see the module docstring)
FLOAT_HASH_KEYS = {"content_sha256"}


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


#: Relative tolerance of the floating-point numbers (see the module docstring). On 2026-12-03
#: torch's scalar, AVX2 and AVX-512 kernels of one machine (``ATEN_CPU_CAPABILITY``) differed by
#: at most 1.4e-4 of a number's scale (SAC's Adam moments); this leaves a factor 14 of room. A
#: change of behaviour (another seed, loss, learning rate or data) moves many numbers by far more.
RTOL = 2e-3
#: Absolute floor of the comparison, for numbers near 0.
ATOL = 1e-6


def _canonical(value: Any, numbers: dict[str, float], path: str = "") -> Any:
    """``value`` as JSON-able data without its floating-point values, which go to ``numbers``
    by their path (a float tensor or array as three sums; an integer one by its bytes' SHA-256)."""
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        if t.is_floating_point():
            x = t.double()
            numbers[f"{path}|sum"], numbers[f"{path}|abs"] = float(x.sum()), float(x.abs().sum())
            numbers[f"{path}|sq"] = float((x * x).sum())
            return {"tensor": str(t.dtype), "shape": list(t.shape)}
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        return {"tensor": str(t.dtype), "shape": list(t.shape), "sha256": hashlib.sha256(raw).hexdigest()}
    if isinstance(value, np.ndarray):
        a = np.ascontiguousarray(value)
        if np.issubdtype(a.dtype, np.floating):
            x = a.astype(np.float64)
            numbers[f"{path}|sum"], numbers[f"{path}|abs"] = float(x.sum()), float(np.abs(x).sum())
            numbers[f"{path}|sq"] = float((x * x).sum())
            return {"array": str(a.dtype), "shape": list(a.shape)}
        return {"array": str(a.dtype), "shape": list(a.shape), "sha256": hashlib.sha256(a.tobytes()).hexdigest()}
    if isinstance(value, dict):
        skip = TIMING_KEYS | FLOAT_HASH_KEYS
        return {str(k): _canonical(v, numbers, f"{path}.{k}") for k, v in value.items() if str(k) not in skip}
    if isinstance(value, list | tuple):
        return [_canonical(v, numbers, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, np.generic):
        return _canonical(value.item(), numbers, path)
    if isinstance(value, float):
        if not np.isfinite(value):
            return repr(value)  # NaN and infinities are structure: exact
        numbers[path] = value
        return "float"
    return value


def _digest_of_state(state: dict[str, Any], numbers: dict[str, float], path: str) -> dict[str, Any]:
    keys = (
        "algorithm", "hyperparameters", "agent", "obs_dim", "action_dim", "observation_layout", "env_config",
        "kind", "feature_stats", "task", "data_window", "score", "metrics", "stats", "env_steps",
        "total_env_steps", "generation", "seed", "cancelled",
    )  # fmt: skip
    return {k: _canonical(state.get(k), numbers, f"{path}.{k}") for k in keys}


def fingerprint(algorithm: str, data_dir: Path, cache_dir: Path) -> dict[str, Any]:
    """``{"structure": SHA-256 hex, "numbers": {path: float}}`` of a fresh generation of
    ``algorithm`` and of its child (see the module docstring).

    Both load their data through :func:`~trainer.pod.run_generation` (``data_dir``, with the
    Parquet cache in ``cache_dir`` so that only the first load parses the CSV)."""
    from trainer.artifacts.checkpoints import load_checkpoint
    from trainer.pod import run_generation

    torch.set_num_threads(1)
    parts = []
    numbers: dict[str, float] = {}
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
        for which, result in (("fresh", first), ("child", child)):
            state = load_checkpoint(result.checkpoint_path)
            parts.append(
                {
                    "checkpoint": _digest_of_state(state, numbers, f"{which}.checkpoint"),
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
                        },
                        numbers,
                        f"{which}.result",
                    ),
                }
            )
    structure: dict[str, Any] = {}
    _flatten(parts, structure, "")
    return {"structure": dict(sorted(structure.items())), "numbers": dict(sorted(numbers.items()))}


def _flatten(value: Any, out: dict[str, Any], path: str) -> None:
    """The leaves of canonical data by path (``[0].checkpoint.agent.config.num_envs``); an empty
    dict or list is a leaf of its own, so that its presence counts."""
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _flatten(v, out, f"{path}.{k}")
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            _flatten(v, out, f"{path}[{i}]")
    else:
        out[path] = value


def _scale(numbers: dict[str, float], key: str) -> float:
    """The size a number is compared at: its own magnitude, and for a tensor's signed sum (which
    can cancel to near 0) at least the sum of its elements' magnitudes."""
    if key.endswith("|sum"):
        return max(abs(numbers[key]), abs(numbers.get(key[: -len("sum")] + "abs", 0.0)))
    return abs(numbers[key])


def _structure_differences(mine: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """The structure's paths that differ: ``"structure PATH: VALUE, recorded VALUE"``."""
    if not isinstance(theirs, dict):
        return ["structure recorded as one hash (before 2026-12-04): regenerate the record"]
    missing = object()
    return [
        f"structure {k}: {mine.get(k, 'absent')!r}, recorded {theirs.get(k, 'absent')!r}"
        for k in sorted(mine.keys() | theirs.keys())
        if mine.get(k, missing) != theirs.get(k, missing)
    ]


def differences(measured: dict[str, Any], recorded: dict[str, Any]) -> list[str]:
    """What differs between two fingerprints: the structure, a path present in one only, or a
    number off by more than ``ATOL + RTOL * scale`` (:func:`_scale` of the recorded value;
    empty: they match)."""
    out = _structure_differences(measured["structure"], recorded["structure"])
    mine, theirs = measured["numbers"], recorded["numbers"]
    out += [f"{k}: only in the recorded values" for k in theirs.keys() - mine.keys()]
    out += [f"{k}: not in the recorded values" for k in mine.keys() - theirs.keys()]
    for k in sorted(mine.keys() & theirs.keys()):
        if abs(mine[k] - theirs[k]) > ATOL + RTOL * _scale(theirs, k):
            out.append(f"{k}: {mine[k]!r}, recorded {theirs[k]!r}")
    return out


def main(argv: list[str] | None = None) -> int:
    from tests.conftest import DATA_DIR

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write the values to {RECORD.name}")
    parser.add_argument("--out", type=Path, help="write the measured fingerprints to this JSON file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="paddock-fingerprint-cache-") as cache:
        measured = {a: fingerprint(a, DATA_DIR, Path(cache)) for a in ALGORITHMS}
    recorded = json.loads(RECORD.read_text())["fingerprints"] if RECORD.exists() else {}
    for algorithm, value in measured.items():
        old = recorded.get(algorithm)
        found = ["not recorded"] if not isinstance(old, dict) else differences(value, old)
        print(f"{algorithm}: {len(value['structure'])} structure paths, {len(value['numbers'])} numbers; "
              f"{'matches the record' if not found else 'differs: ' + '; '.join(found[:5])}")  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps(measured, indent=1) + "\n")
    if args.write:
        record = {"_comment": NOTE, "fingerprints": measured}
        RECORD.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
