"""The Triton LayerNorm (normkit/triton_layer_norm.py), where it cannot run: on a machine
without CUDA or Triton (this course's CPU environment) the module imports, `python -m`
prints one line and exits 0, and bad arguments are refused with a specific message before
any GPU is needed. Its kernels are checked against torch by report() itself, on a GPU."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from normkit import triton_layer_norm

REPO = Path(__file__).resolve().parents[1]
SKIPPED = "No CUDA device or no Triton here: the Triton LayerNorm is skipped.\n"


def test_the_command_prints_one_line_and_succeeds_without_a_cuda_device():
    """CUDA_VISIBLE_DEVICES="" hides any GPU, so the same holds on a machine with one."""
    result = subprocess.run([sys.executable, "-m", "normkit.triton_layer_norm"], cwd=REPO,
                            env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
                            capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout, result.stderr) == (0, SKIPPED, "")


def test_the_module_imports_and_skips_without_triton():
    """`import triton` made to fail (a None in sys.modules raises ImportError), as in the
    course's CPU environment, whatever this machine has installed."""
    code = ("import sys; sys.modules['triton'] = None\n"
            "import normkit.triton_layer_norm as t\n"
            "assert t.triton is None and t.tl is None and not t.available()\n"
            "t.main()\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert (result.returncode, result.stdout, result.stderr) == (0, SKIPPED, "")


@pytest.mark.parametrize("x, message", [
    (torch.zeros(4), "forward: x must be a 2-D (rows, H) tensor; got shape (4,)"),
    (torch.zeros(0, 4), "forward: x needs at least one row and 1 <= H <= 65536; got shape (0, 4)"),
    (torch.zeros(2, 65537), "forward: x needs at least one row and 1 <= H <= 65536; got shape (2, 65537)"),
    (torch.zeros(2, 4, dtype=torch.float64), "forward: x's dtype must be float32, float16 or bfloat16; got torch.float64"),
    (torch.zeros(4, 2).T, "forward: x must be contiguous; got strides (1, 2)"),
    (torch.zeros(2, 4), "forward: x must be on a CUDA device; got cpu"),
])
def test_forward_refuses_bad_input_with_a_specific_message(x, message):
    with pytest.raises(ValueError) as error:
        triton_layer_norm.forward(x, torch.zeros(4), torch.zeros(4))
    assert str(error.value) == message


def test_backward_refuses_an_input_unlike_x_with_a_specific_message():
    with pytest.raises(ValueError) as error:  # the check backward applies to dy, on a CPU
        triton_layer_norm._check_like("dy", torch.zeros(3, 4), (3, 5), torch.float32,
                                      torch.device("cpu"), "backward")
    assert str(error.value) == ("backward: dy must have shape (3, 5), dtype torch.float32, "
                                "device cpu; got (3, 4), torch.float32, cpu")
    with pytest.raises(ValueError, match="^backward: x must be on a CUDA device; got cpu$"):
        triton_layer_norm.backward(*(torch.zeros(3, 4),) * 2, torch.zeros(4),
                                   torch.zeros(3), torch.zeros(3))


def test_a_missing_triton_or_device_is_named(monkeypatch):
    monkeypatch.setattr(triton_layer_norm, "triton", None)
    with pytest.raises(RuntimeError, match="needs Triton"):
        triton_layer_norm._require_gpu()
    monkeypatch.setattr(triton_layer_norm, "triton", object())  # installed, but no device
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="needs a CUDA device; torch sees none"):
        triton_layer_norm._require_gpu()
    assert not triton_layer_norm.available()
