"""Device selection: which devices a run and a process may ask for, and which GPU ordinals exist."""

from __future__ import annotations

import pytest
import torch

from trainer.agents import make_agent
from trainer.agents._common import make_adam
from trainer.cli.main import main
from trainer.errors import ConfigError
from trainer.util.device import RUN_DEVICES, check_cuda_index, check_run_device, configure_device, pick_device


def test_a_pinned_process_sees_its_gpu_as_cuda_0_and_no_other_ordinal():
    # CUDA_VISIBLE_DEVICES=3: one visible GPU, renumbered cuda:0
    assert check_cuda_index(torch.device("cuda"), 1) == torch.device("cuda", 0)
    assert check_cuda_index(torch.device("cuda:0"), 1) == torch.device("cuda", 0)
    with pytest.raises(ConfigError) as info:
        check_cuda_index(torch.device("cuda:1"), 1)
    assert info.value.details == {"field": "device"}
    assert "cuda:1 is not visible" in info.value.message and "cuda:0 to cuda:0" in info.value.message


def test_cuda_without_a_visible_gpu_is_a_config_error():
    with pytest.raises(ConfigError, match="no GPU is available") as info:
        check_cuda_index(torch.device("cuda:0"), 0)
    assert info.value.details == {"field": "device"}


@pytest.mark.parametrize("requested", ["cuda:64", "mps", "meta", "tpu!", "cuda:-1"])
def test_pick_device_refuses_devices_this_process_cannot_use(requested):
    with pytest.raises(ConfigError) as info:
        pick_device(requested)
    assert info.value.details == {"field": "device"}


def test_auto_and_cpu_pick_a_usable_device():
    assert pick_device("cpu") == torch.device("cpu")
    expected = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    assert pick_device("auto") == pick_device(None) == expected


@pytest.mark.parametrize("device", RUN_DEVICES)
def test_a_run_asks_for_a_kind_of_device(device):
    assert check_run_device(device) == device


@pytest.mark.parametrize("device", ["cuda:1", "cuda:0", "gpu", ""])
def test_a_run_may_not_name_a_gpu_ordinal(device):
    with pytest.raises(ConfigError, match="auto, cpu or cuda") as info:
        check_run_device(device)
    assert info.value.details == {"field": "device"}


def test_the_cli_exits_2_naming_the_device_for_an_invisible_gpu(tmp_path, capsys):
    checkpoint = tmp_path / "agent.pt"
    checkpoint.write_bytes(b"never read: the device is checked first")
    assert main(["evaluate", str(checkpoint), "--device", "cuda:64"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "device" in err


def test_the_cpu_keeps_full_float32_matmuls_and_default_adam():
    before = torch.get_float32_matmul_precision()
    configure_device(torch.device("cpu"))
    assert torch.get_float32_matmul_precision() == before
    optimizer = make_adam([torch.nn.Parameter(torch.zeros(3))], 1e-3, torch.device("cpu"))
    assert not optimizer.defaults["fused"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_uses_tf32_matmuls_and_fused_adam():
    device = torch.device("cuda", 0)
    configure_device(device)
    assert torch.get_float32_matmul_precision() == "high"
    agent = make_agent("sac", 8, 2, {"num_envs": 4, "hidden_sizes": [8]}, device=device, seed=0)
    assert agent.actor_optimizer.defaults["fused"] and agent.critic_optimizer.defaults["fused"]
