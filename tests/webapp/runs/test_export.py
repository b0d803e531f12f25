"""Metrics out: ``manage.py export_metrics`` writes a run's curves, scores and hyperparameters
as TensorBoard event files and to an MLflow tracking store (a local folder), read back here
with each tool's own formats."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

pytestmark = pytest.mark.django_db


def _events(folder: Path) -> list:
    """Every event of the TFRecord event files directly in ``folder`` (length, crc, payload, crc)."""
    from tensorboardX.proto import event_pb2

    out = []
    for path in sorted(folder.glob("events.out.tfevents.*")):
        data = path.read_bytes()
        at = 0
        while at < len(data):
            (length,) = struct.unpack("<Q", data[at : at + 8])
            event = event_pb2.Event()
            event.ParseFromString(data[at + 12 : at + 12 + length])
            out.append(event)
            at += 12 + length + 4
    return out


def _scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    found: dict[str, list[tuple[int, float]]] = {}
    for event in _events(folder):
        for value in event.summary.value:
            if value.HasField("simple_value"):
                found.setdefault(value.tag, []).append((event.step, value.simple_value))
    return found


def test_tensorboard_event_files_hold_the_scores_and_each_generations_curve(world, tmp_path):
    call_command("export_metrics", world.run.id, tensorboard=str(tmp_path))
    root = tmp_path / f"run-{world.run.id}"
    scores = _scalars(root)
    assert [round(v, 3) for _, v in scores["scores/validation"]] == [0.5, 1.5, 1.0, 0.2]
    assert scores["scores/best"] == [(0, 1.5)]
    generations = sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("gen-"))
    assert len(generations) == 4
    curve = _scalars(generations[0])
    assert [s for s, _ in curve["train/policy_loss"]] == [128, 256]  # the line's env steps
    hparams = root / "hparams"
    assert hparams.is_dir() and _events(hparams), "add_hparams wrote its own folder"


def test_mlflow_store_holds_the_params_scores_and_nested_generation_runs(world, tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"file:{tmp_path / 'mlruns'}"
    call_command("export_metrics", world.run.id, mlflow=uri, experiment="mine")
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("mine")
    runs = client.search_runs([experiment.experiment_id])
    parent = next(r for r in runs if r.data.tags.get("paddock.run_id") == str(world.run.id))
    assert parent.data.params["seed"] == str(world.run.seed) and parent.data.params["kind"] == "stock_trading"
    assert parent.data.params["hp.num_envs"] == "4" and parent.data.params["algorithm"] == "ppo"
    assert parent.data.params["torch"] == world.run.provenance["packages"]["torch"]
    history = client.get_metric_history(parent.info.run_id, "validation_score")
    assert [round(m.value, 3) for m in sorted(history, key=lambda m: m.step)] == [0.5, 1.5, 1.0, 0.2]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == 4
    assert client.get_metric_history(children[0].info.run_id, "policy_loss")


def test_a_bad_run_or_no_target_is_a_clear_error_with_exit_2(world, tmp_path):
    with pytest.raises(CommandError) as missing:
        call_command("export_metrics", 999_999, tensorboard=str(tmp_path))
    assert "run_id" in str(missing.value) and missing.value.returncode == 2
    with pytest.raises(CommandError) as nothing:
        call_command("export_metrics", world.run.id)
    assert "--tensorboard" in str(nothing.value)
