import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    torch.set_num_threads(1)
