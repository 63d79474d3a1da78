"""The graders' tests in other machine configurations: the same float32 computation
differs in its last bits between CPUs, so every graded check must hold on any of them
(normlib.testing's error model). Each configuration re-runs tests/test_graders.py in a
subprocess, where correct variants must pass at a tenth of every tolerance and every
mistake must fail at ten times it:

- torch's generic kernels (ATEN_CPU_CAPABILITY=default, as on a CPU without AVX2), NumPy
  without its SIMD dispatch (NPY_DISABLE_CPU_FEATURES) and OpenBLAS on an old core's
  kernels (OPENBLAS_CORETYPE, for NumPy's matrix products), 1 thread;
- torch's AVX2 kernels, 2 threads: on an AVX-512 machine, another set of kernels; skipped
  where it is the machine's own configuration (the main run covers it: an AVX2 CPU with
  2 cores, as this course's machines) and on a CPU without AVX2.

The main run of `make test` covers the machine's own kernels. A probe first checks that
each setting took effect (a variable the libraries ignored would prove nothing). torch's
matrix products (MKL, oneDNN) are limited too (MKL_ENABLE_INSTRUCTIONS, ONEDNN_MAX_CPU_ISA),
but neither library says whether it obeyed, so the probe cannot check those two.
"""

import json
import os
import platform
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import REPO

# NumPy's features above its baseline, chosen at run time (x86-64: X86_V3, X86_V4, ...)
DISPATCHED = np._core._multiarray_umath.__cpu_dispatch__
OLD_CORE = {"x86_64": "Prescott", "aarch64": "ARMV8"}.get(platform.machine())
BASELINE = {"ATEN_CPU_CAPABILITY": "default", "NPY_DISABLE_CPU_FEATURES": " ".join(DISPATCHED),
            "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41",
            "OMP_NUM_THREADS": "1"}
CONFIGURATIONS = {
    "torch generic, NumPy baseline, 1 thread":
        {**BASELINE, **({"OPENBLAS_CORETYPE": OLD_CORE} if OLD_CORE else {})},
    "torch AVX2, 2 threads": {"ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "2"},
}
PROBE = """
import ctypes, glob, json, os, numpy, torch
features = numpy._core._multiarray_umath.__cpu_features__
core = None  # OpenBLAS's kernels, as the library bundled with NumPy's wheel names them
for lib in glob.glob(os.path.join(os.path.dirname(numpy.__file__), "..", "numpy.libs",
                                  "libscipy_openblas*")):
    corename = ctypes.CDLL(lib).scipy_openblas_get_corename64_
    corename.restype = ctypes.c_char_p
    core = corename().decode()
print(json.dumps({"torch": torch.backends.cpu.get_cpu_capability().lower(),
                  "threads": torch.get_num_threads(), "openblas": core,
                  "numpy": sorted(f for f in numpy._core._multiarray_umath.__cpu_dispatch__
                                  if features.get(f))}))
"""


def configured(settings):
    """What torch, NumPy and OpenBLAS use with these environment variables: torch's
    kernels and threads, NumPy's enabled dispatched features, OpenBLAS's core (or None)."""
    out = subprocess.run([sys.executable, "-c", PROBE], env={**os.environ, **settings},
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_graders_hold_in_configuration(name):
    settings = CONFIGURATIONS[name]
    seen, native = configured(settings), configured({})
    if settings["ATEN_CPU_CAPABILITY"] == "avx2" and seen["torch"] != "avx2":
        pytest.skip(f"this CPU has no AVX2 (torch runs its {seen['torch']} kernels)")
    if seen == native:
        pytest.skip(f"{name} is this machine's own configuration: the main run covers it")
    assert seen["torch"] == settings["ATEN_CPU_CAPABILITY"], seen
    assert seen["threads"] == int(settings["OMP_NUM_THREADS"]), seen
    if "NPY_DISABLE_CPU_FEATURES" in settings:
        assert seen["numpy"] == [], f"NumPy still dispatches to {seen['numpy']}"
    if "OPENBLAS_CORETYPE" in settings and native["openblas"] is not None:
        assert seen["openblas"] != native["openblas"], f"OpenBLAS still runs {seen['openblas']}"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_graders.py", "-q", "-p", "no:xdist",
         "-p", "no:cacheprovider", "-x"],
        cwd=REPO, env={**os.environ, **settings}, capture_output=True, text=True)
    assert run.returncode == 0, f"{name}: {settings}\n{run.stdout[-4000:]}{run.stderr[-2000:]}"
