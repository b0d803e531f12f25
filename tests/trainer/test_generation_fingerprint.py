"""A PPO, an A2C and a SAC generation are bit-identical to the recorded fingerprints.

A refactoring of the trainer must leave what a generation produces unchanged (issue 26); the
values in ``generation_fingerprints.json`` change only with an intended change of behaviour
(see :mod:`tests.trainer.generation_fingerprint` for what is hashed and how to regenerate them).
"""

from __future__ import annotations

import json

import pytest

from tests.trainer.generation_fingerprint import ALGORITHMS, RECORD, fingerprint


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fingerprint-cache")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_generation_produces_exactly_the_recorded_fingerprint(algorithm, data_dir, cache_dir):
    recorded = json.loads(RECORD.read_text())["fingerprints"][algorithm]
    assert fingerprint(algorithm, data_dir, cache_dir) == recorded, (
        f"{algorithm}: a generation's checkpoint, metrics or hyperparameters changed; if that is intended, "
        "regenerate with `python -m tests.trainer.generation_fingerprint --write` and say why in the commit"
    )
