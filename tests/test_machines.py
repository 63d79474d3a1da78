"""The graders' tests in other machine configurations: the same float32 computation
differs in its last bits between CPUs, so every graded check must hold on any of them
(normlib.testing's error model). Each configuration re-runs tests/test_graders.py in a
subprocess, where correct variants must pass at a tenth of every tolerance and every
mistake must fail at ten times it:

- torch's generic kernels (ATEN_CPU_CAPABILITY=default, as on a CPU without AVX2), NumPy
  without its SIMD dispatch (NPY_DISABLE_CPU_FEATURES), 1 thread;
- torch's AVX2 kernels, 2 threads.

The main run of `make test` covers the machine's own kernels. A probe first checks that
the configuration took effect (a variable the libraries ignored would prove nothing).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import REPO

# NumPy's features above its baseline, chosen at run time (x86-64: X86_V3, X86_V4, ...)
DISPATCHED = np._core._multiarray_umath.__cpu_dispatch__
CONFIGURATIONS = {
    "torch generic, NumPy baseline, 1 thread": {
        "ATEN_CPU_CAPABILITY": "default", "NPY_DISABLE_CPU_FEATURES": " ".join(DISPATCHED),
        "OMP_NUM_THREADS": "1"},
    "torch AVX2, 2 threads": {"ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "2"},
}
PROBE = """
import json, numpy, torch
features = numpy._core._multiarray_umath.__cpu_features__
print(json.dumps({"torch": torch.backends.cpu.get_cpu_capability().lower(),
                  "threads": torch.get_num_threads(),
                  "numpy": sorted(f for f in numpy._core._multiarray_umath.__cpu_dispatch__
                                  if features.get(f))}))
"""


def configured(env):
    """What torch and NumPy use under env: torch's kernels, its threads, NumPy's enabled
    dispatched features."""
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_graders_hold_in_configuration(name):
    settings = CONFIGURATIONS[name]
    env = {**os.environ, **settings}
    seen = configured(env)
    if seen["torch"] != settings["ATEN_CPU_CAPABILITY"]:
        pytest.skip(f"this CPU cannot run torch's {settings['ATEN_CPU_CAPABILITY']} kernels "
                    f"(it runs {seen['torch']})")
    assert seen["threads"] == int(settings["OMP_NUM_THREADS"]), seen
    if "NPY_DISABLE_CPU_FEATURES" in settings:
        assert seen["numpy"] == [], f"NumPy still dispatches to {seen['numpy']}"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_graders.py", "-q", "-p", "no:xdist",
         "-p", "no:cacheprovider", "-x"],
        cwd=REPO, env=env, capture_output=True, text=True)
    assert run.returncode == 0, f"{name}: {settings}\n{run.stdout[-4000:]}{run.stderr[-2000:]}"
