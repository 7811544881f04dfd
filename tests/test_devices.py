"""devices.py: one setting resolved once to a torch.device, and the record summary.json keeps.
No CUDA op runs here: CUDA's presence is monkeypatched where a test needs it."""

import pytest
import torch
from pydantic import ValidationError

from posttrain.devices import device_record, resolve_device
from posttrain.errors import ConfigError
from posttrain.recipes.quickstart.config import QuickstartConfig
from posttrain.recipes.rl.config import RLRunConfig
from posttrain.train.precision import resolve_dtype


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def one_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)


def test_auto_is_the_cpu_without_cuda(no_cuda):
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device("cpu") == torch.device("cpu")


@pytest.mark.parametrize("setting", ["cuda", "cuda:0"])
def test_cuda_without_cuda_is_a_clear_error(no_cuda, setting):
    with pytest.raises(ConfigError, match=r"torch sees no CUDA GPU here.*use device = \"auto\" or \"cpu\""):
        resolve_device(setting)


def test_cuda_is_taken_where_torch_sees_a_gpu(one_gpu):
    assert resolve_device("auto") == torch.device("cuda")
    assert resolve_device("cuda") == torch.device("cuda")
    assert resolve_device("cuda:0") == torch.device("cuda:0")
    with pytest.raises(ConfigError, match="sees 1 GPU"):
        resolve_device("cuda:1")


@pytest.mark.parametrize("setting", ["gpu", "CUDA", "cuda:", "mps", ""])
def test_other_settings_are_refused_when_read(setting):
    with pytest.raises(ConfigError, match="device must be auto, cpu, cuda or cuda:N"):
        resolve_device(setting)
    for config in (RLRunConfig, QuickstartConfig):
        with pytest.raises(ValidationError, match="device must be"):
            config(device=setting)


def test_configs_default_to_auto():
    assert RLRunConfig().device == "auto" and QuickstartConfig().device == "auto"


def test_the_record_names_the_gpu_or_none(one_gpu):
    assert device_record(torch.device("cuda")) == {"device": "cuda", "gpu": "NVIDIA H100 80GB HBM3", "bf16": True}
    cpu = device_record("cpu")
    assert cpu["device"] == "cpu" and cpu["gpu"] is None and cpu["bf16"] == (resolve_dtype("auto") == "bf16")


def test_the_trainer_autocasts_bf16_on_a_gpu_that_has_it(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert resolve_dtype("auto", device="cuda") == "bf16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert resolve_dtype("auto", device="cuda") == "fp32"
    assert resolve_dtype("fp32", device="cuda") == "fp32"
