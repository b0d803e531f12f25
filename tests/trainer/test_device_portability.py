"""Checkpoints move between device types: a GPU-trained agent works on a CPU and the reverse.

A ``torch.Generator``'s saved state depends on its device type (CPU Mersenne Twister: 5,056
bytes; CUDA Philox: 16 bytes, seed and offset). A GPU checkpoint is reproduced on this CPU-only
machine by replacing its saved generator state with a 16-byte CUDA-style state; every way a
user meets a checkpoint (export, ``trainer evaluate``, a backtest, a child generation) must then
work. The reverse direction (a CPU state into a CUDA generator) runs on a real GPU in
``test_a_cpu_state_reseeds_a_cuda_generator`` and on the stand-in accelerator of
``tests/trainer/test_device_discipline.py`` everywhere.
"""

from __future__ import annotations

import json

import pytest
import torch

from trainer.agents._common import reseed_from_state, restore_generator
from trainer.artifacts.bundle import export_bundle
from trainer.artifacts.bundle_reader import load_agent
from trainer.artifacts.checkpoints import load_checkpoint, save_checkpoint
from trainer.artifacts.rebuild import build_agent
from trainer.backtest.engine import run_backtest
from trainer.cli.main import main
from trainer.data.pipeline import load_market_data
from trainer.demo import demo_task_dict
from trainer.pod import run_generation
from trainer.task import TaskSpec

TICKERS = ["AAPL", "MSFT"]
CUDA_STATE = torch.tensor(list((1234).to_bytes(8, "little") + (4096).to_bytes(8, "little")), dtype=torch.uint8)
"""What ``torch.Generator("cuda").get_state()`` returns: seed and Philox offset, 8 bytes each."""


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def task() -> TaskSpec:
    d = demo_task_dict()
    d["data"]["tickers"] = TICKERS
    d["hyperparameters"] = {"num_envs": 16, "rollout_steps": 8, "num_minibatches": 2, "hidden_sizes": [16, 16]}
    return TaskSpec.from_dict(d)


@pytest.fixture(scope="module")
def market(task, data_dir, tmp_path_factory):
    return load_market_data(task.data, data_dir=data_dir, cache_dir=tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def cpu_checkpoint(task, market, tmp_path_factory):
    out = tmp_path_factory.mktemp("cpu") / "g1.pt"
    return run_generation(task, env_steps=256, out_path=out, seed=1, device="cpu", market_data=market).checkpoint_path


@pytest.fixture(scope="module", params=["recorded", "unrecorded"])
def gpu_checkpoint(request, cpu_checkpoint, tmp_path_factory):
    """The CPU checkpoint as a GPU worker writes it: a 16-byte generator state.

    ``recorded``: the checkpoint names the generator's device type (``generator_device``);
    ``unrecorded``: written before that key existed, so only the state's size tells.
    """
    state = load_checkpoint(cpu_checkpoint)
    state["agent"]["generator"] = CUDA_STATE.clone()
    if request.param == "recorded":
        state["agent"]["generator_device"] = "cuda"
    else:
        state["agent"].pop("generator_device", None)
    path = tmp_path_factory.mktemp("gpu") / "g1.pt"
    save_checkpoint(state, path)
    return path


def test_a_gpu_generator_state_reseeds_a_cpu_generator_deterministically():
    first, second = torch.Generator(), torch.Generator()
    assert restore_generator(first, CUDA_STATE, "cuda") is False
    assert restore_generator(second, CUDA_STATE, None) is False  # size alone decides
    expected = torch.Generator().manual_seed(reseed_from_state(CUDA_STATE, "cuda"))
    assert torch.equal(torch.rand(8, generator=first), torch.rand(8, generator=expected))
    other = torch.Generator()
    restore_generator(other, CUDA_STATE.flip(0), "cuda")
    assert not torch.equal(torch.rand(8, generator=other), torch.rand(8, generator=second))


def test_a_cpu_generator_state_on_the_cpu_is_restored_exactly():
    source = torch.Generator().manual_seed(7)
    torch.rand(3, generator=source)
    target = torch.Generator()
    assert restore_generator(target, source.get_state(), "cpu") is True
    assert torch.equal(torch.rand(5, generator=target), torch.rand(5, generator=source))


def test_a_generator_state_must_be_bytes():
    with pytest.raises(TypeError, match="uint8"):
        restore_generator(torch.Generator(), torch.zeros(16), "cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cpu_state_reseeds_a_cuda_generator():
    cpu_state = torch.Generator().manual_seed(3).get_state()
    generator = torch.Generator(device="cuda")
    assert restore_generator(generator, cpu_state, "cpu") is False
    expected = torch.Generator(device="cuda").manual_seed(reseed_from_state(cpu_state, "cpu"))
    assert torch.equal(
        torch.rand(4, generator=generator, device="cuda"), torch.rand(4, generator=expected, device="cuda")
    )


def test_a_gpu_checkpoint_exports_on_the_cpu_to_the_same_policy(gpu_checkpoint, cpu_checkpoint, tmp_path):
    export_bundle(gpu_checkpoint, tmp_path / "gpu.zip")
    export_bundle(cpu_checkpoint, tmp_path / "cpu.zip")
    obs = torch.rand(8, load_agent(tmp_path / "cpu.zip").obs_dim) * 4
    assert torch.equal(load_agent(tmp_path / "gpu.zip").act(obs), load_agent(tmp_path / "cpu.zip").act(obs))


def test_a_gpu_checkpoint_evaluates_from_the_command_line(gpu_checkpoint, cpu_checkpoint, data_dir, tmp_path, capsys):
    common = ["--data-dir", str(data_dir), "--cache-dir", str(tmp_path), "--split", "validation", "--json"]
    assert main(["evaluate", str(gpu_checkpoint), *common]) == 0
    from_gpu = json.loads(capsys.readouterr().out)
    assert main(["evaluate", str(cpu_checkpoint), *common]) == 0
    assert from_gpu["metrics"] == json.loads(capsys.readouterr().out)["metrics"]


def test_a_gpu_checkpoint_backtests_on_the_cpu(gpu_checkpoint, task, market):
    agent = build_agent(load_checkpoint(gpu_checkpoint))
    result = run_backtest(agent.policy_module(), market, task.env, start="2021-01-04", end="2021-03-31")
    assert result.metrics["agent"]["num_days"] > 50
    assert result.daily["account_value"].iloc[0] == task.env.initial_cash


def test_a_cpu_child_continues_a_gpu_parent_reproducibly(gpu_checkpoint, task, market, tmp_path):
    def child(name: str):
        out = run_generation(
            task, env_steps=128, out_path=tmp_path / name, parent=gpu_checkpoint, seed=4, device="cpu",
            market_data=market,
        )  # fmt: skip
        return out, load_checkpoint(out.checkpoint_path)["agent"]

    result, first = child("a.pt")
    _, twin = child("b.pt")
    assert result.total_env_steps == 256 + 128
    assert first["generator_device"] == "cpu" and first["generator"].numel() == torch.Generator().get_state().numel()
    assert all(torch.equal(first["actor"][k], twin["actor"][k]) for k in first["actor"])
