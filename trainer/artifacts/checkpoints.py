"""Checkpoints (resumable training state) and the file helpers every trainer write uses.

**Checkpoint**: one ``torch.save`` file of plain containers and tensors (no pickled classes),
so it loads with ``torch.load(weights_only=True)``. Keys (``CHECKPOINT_FORMAT`` version 1):

* ``format``, ``format_version``, ``paddock_version``, ``created_at`` (UTC ISO 8601);
* ``algorithm``, ``hyperparameters`` (the agent's full dict), ``agent`` (``agent.state_dict()``:
  networks, optimizers, observation normalizer, RNG state (``generator``, with its device type
  in ``generator_device``; a state from another device type reseeds, see
  :func:`trainer.agents._common.restore_generator`) and step counters);
* ``obs_dim``, ``action_dim``, ``observation_layout`` (the env's JSON layout), ``env_config``;
* ``task`` (:meth:`trainer.task.TaskSpec.to_dict`), ``data_window`` (tickers, feature names,
  first/last day of each split actually used, ``periods_per_year`` of the bars: 252 for days,
  bars a session x 252 intraday, content hash of the panel);
* ``score``, ``metrics`` (validation), ``env_steps`` (this generation), ``total_env_steps``,
  ``generation``, ``parent_sha256``, ``seed``, ``cancelled``.

Every file is written atomically (:func:`atomic_write_bytes`): a temporary file in the
destination folder, ``fsync``, then ``os.replace``, so a crash never leaves a half-written
file under the final name. Loading never unpickles arbitrary objects (``weights_only=True``).
"""

from __future__ import annotations

import datetime as _dt
import io
import zipfile
from pathlib import Path
from typing import Any

import torch

from trainer.errors import BundleError
from trainer.util.files import atomic_write_bytes, sha256_file
from trainer.util.nonfinite import nonfinite_tensors
from trainer.version import __version__

__all__ = ["CHECKPOINT_FORMAT", "CHECKPOINT_VERSION", "load_checkpoint", "save_checkpoint", "utc_now"]

CHECKPOINT_FORMAT = "paddock.checkpoint"
CHECKPOINT_VERSION = 1
_REQUIRED_CHECKPOINT_KEYS = (
    "algorithm",
    "hyperparameters",
    "agent",
    "obs_dim",
    "action_dim",
    "observation_layout",
    "env_config",
    "task",
)


def utc_now() -> str:
    """Current UTC time as ISO 8601 with a ``Z`` suffix, to the second."""
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


# ---------------------------------------------------------------------------- checkpoints
def _on_cpu(value: Any) -> Any:
    """``value`` with every tensor of its dicts, lists and tuples detached and on the CPU."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: _on_cpu(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_on_cpu(v) for v in value)
    return value


def save_checkpoint(state: dict[str, Any], path: str | Path) -> str:
    """Serialize a checkpoint dict with ``torch.save`` and write it atomically.

    Args:
        state: plain containers (dict/list/tuple), str/int/float/bool/None and tensors only
            (what ``torch.load(weights_only=True)`` accepts). ``format``/``format_version``/
            ``paddock_version`` are filled in when missing.
        path: destination file (conventionally ``*.pt``).

    Tensors are stored on the CPU (a checkpoint written by a GPU worker loads anywhere, and
    its bytes do not depend on which GPU wrote it).

    Returns:
        Hex SHA-256 of the written file.

    Raises:
        BundleError: the state holds an object that would need unpickling to load (it is
            checked by loading it back from memory before anything is written), or the file
            cannot be written.
    """
    state = _on_cpu(
        {
            "format": CHECKPOINT_FORMAT,
            "format_version": CHECKPOINT_VERSION,
            "paddock_version": __version__,
            **state,
        }
    )
    buf = io.BytesIO()
    torch.save(state, buf)
    data = buf.getvalue()
    try:
        torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:  # an unsafe type would make the file unloadable later
        raise BundleError(
            f"{path}: checkpoint state holds an object that weights_only loading refuses ({exc})", file=str(path)
        ) from exc
    return atomic_write_bytes(path, data)


def load_checkpoint(path: str | Path, *, expected_sha256: str | None = None) -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` onto the CPU.

    Uses ``torch.load(weights_only=True)`` only: no arbitrary object is ever unpickled.

    Args:
        path: the checkpoint file.
        expected_sha256: when given, the file's SHA-256 must equal it (tamper/corruption check).

    Returns:
        The checkpoint dict (tensors on the CPU); see the module doc for its keys.

    Raises:
        BundleError: the file is missing, unreadable, truncated, not a Paddock checkpoint, of a
            newer format, or its SHA-256 differs from ``expected_sha256`` (``file`` names it).
    """
    path = Path(path)
    if not path.is_file():
        raise BundleError(f"checkpoint {path} does not exist", file=str(path))
    if expected_sha256 is not None:
        actual = sha256_file(path)
        if actual != expected_sha256.lower():
            raise BundleError(
                f"checkpoint {path}: SHA-256 {actual} does not match the expected {expected_sha256}", file=str(path)
            )
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            if "policy.safetensors" in archive.namelist():
                raise BundleError(
                    f"{path} is an agent bundle, not a checkpoint: give the generation's .pt file "
                    "(a bundle loads with trainer.load_agent)",
                    file=str(path),
                )
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated zip, foreign pickle, unsafe globals...
        # torch's own message suggests weights_only=False, which would run the file's code
        raise BundleError(
            f"{path} is not a Paddock checkpoint (torch cannot read it as one: {type(exc).__name__})",
            file=str(path),
        ) from exc
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise BundleError(f"{path} is not a Paddock checkpoint", file=str(path))
    if int(state.get("format_version", 0)) > CHECKPOINT_VERSION:
        raise BundleError(
            f"checkpoint {path} has format version {state['format_version']}; this Paddock reads up to "
            f"{CHECKPOINT_VERSION}",
            file=str(path),
        )
    missing = [k for k in _REQUIRED_CHECKPOINT_KEYS if k not in state]
    if missing:
        raise BundleError(f"checkpoint {path} lacks {', '.join(missing)}", file=str(path))
    return state


def refuse_nonfinite(tensors: Any, what: str) -> None:
    """Raise BundleError when a tensor of ``tensors`` (nested) holds NaN or inf.

    Training refuses to save a diverged agent, but a checkpoint or bundle may come from
    elsewhere (an older Paddock, a hand-edited file); its policy would emit NaN actions.
    """
    bad = nonfinite_tensors(tensors)
    if bad:
        more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
        raise BundleError(
            f"{what} holds NaN or infinite parameters ({bad[0]}{more}): the agent diverged in training and "
            "cannot be exported, evaluated or backtested",
            field="parameters",
        )
