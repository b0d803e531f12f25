"""A PPO, an A2C and a SAC generation match the recorded fingerprints: the same structure
exactly (by path), the same floating-point numbers within the CPU kernels' rounding.

A refactoring of the trainer must leave what a generation produces unchanged (issue 26); the
values in ``generation_fingerprints.json`` change only with an intended change of behaviour
(see :mod:`tests.trainer.generation_fingerprint` for what is hashed and how to regenerate them).
"""

from __future__ import annotations

import json

import pytest

from tests.trainer.generation_fingerprint import ALGORITHMS, RECORD, differences, fingerprint


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fingerprint-cache")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_generation_produces_exactly_the_recorded_fingerprint(algorithm, data_dir, cache_dir):
    recorded = json.loads(RECORD.read_text())["fingerprints"][algorithm]
    found = differences(fingerprint(algorithm, data_dir, cache_dir), recorded)
    assert found == [], (
        f"{algorithm}: a generation's checkpoint, metrics or hyperparameters changed ({'; '.join(found[:5])}); "
        "if that is intended, regenerate with `python -m tests.trainer.generation_fingerprint --write` and say why "
        "in the commit"
    )


def test_the_comparison_tells_a_rounding_difference_from_a_change():
    s = {".seed": 7, ".policy": "mlp"}
    recorded = {"structure": s, "numbers": {"a": 1.0, "b": -2.5e-3, "w|sum": 0.01, "w|abs": 40.0}}
    close = {"a": 1.0 + 1e-5, "b": -2.5e-3 * (1 + 1e-5), "w|sum": 0.01 + 1e-3, "w|abs": 40.0}
    assert differences({"structure": s, "numbers": close}, recorded) == []  # a sum is judged at its |abs|
    changed = {**recorded["numbers"], "a": 1.01}
    assert differences({"structure": s, "numbers": changed}, recorded) == ["a: 1.01, recorded 1.0"]
    other = {".seed": 8, ".policy": "mlp", ".kappa": "float"}
    assert differences({"structure": other, "numbers": recorded["numbers"]}, recorded) == [
        "structure .kappa: 'float', recorded 'absent'",
        "structure .seed: 8, recorded 7",
    ]
    partial = {k: v for k, v in recorded["numbers"].items() if k != "b"}
    assert differences({"structure": s, "numbers": partial}, recorded) == ["b: only in the recorded values"]
