"""The graders' tests and the training claims in other CPU configurations: the same float32
computation differs in its last bits between CPUs, so every graded check (normkit.testing's
error model) and every claim a training run asserts must hold on any of them.

Each of CONFIGURATIONS (torch's generic kernels, NumPy without SIMD dispatch and OpenBLAS on
an old core, 1 thread; torch's AVX2 kernels, 2 threads) re-runs, in a subprocess,
tests/test_graders.py (correct variants pass at a tenth of every tolerance, mistakes fail at
ten times it), the visible checks' naming of each mistake (DIAGNOSIS) and the notebooks'
measurements. FARTHEST alone also runs every notebook and the training experiments,
perturbed by jitter 1 (EXPERIMENTS, CAPSTONE, TODAY). Each sets every thread variable
(tools.sandbox.bubblewrap.threads). None is skipped: a probe checks that each setting took
effect, and `unmet`, which reads it, is tested on what other machines report. MKL and oneDNN
are limited too, but do not say whether they obeyed: the probe cannot check those two.
"""

import json
import os
import platform
import subprocess
import sys

import nbformat
import numpy as np
import pytest

from tests.conftest import REPO
from tools.course.exercises import SOLUTIONS, notebooks, unit
from tools.sandbox.bubblewrap import threads

# NumPy's features above its baseline, chosen at run time (x86-64: X86_V3, X86_V4, ...)
DISPATCHED = np._core._multiarray_umath.__cpu_dispatch__
OLD_CORE = {"x86_64": "Prescott", "aarch64": "ARMV8"}.get(platform.machine())
BASELINE = {"ATEN_CPU_CAPABILITY": "default", "NPY_DISABLE_CPU_FEATURES": " ".join(DISPATCHED),
            "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONEDNN_MAX_CPU_ISA": "SSE41"}
CONFIGURATIONS = {
    "torch generic, NumPy baseline, 1 thread":
        {**BASELINE, **threads(1), **({"OPENBLAS_CORETYPE": OLD_CORE} if OLD_CORE else {})},
    # its threads sleep while they wait (OMP_WAIT_POLICY): beside the other pytest worker on
    # a 2-core machine, spinning ones made this run take twice as long (numerics unchanged)
    "torch AVX2, 2 threads": {"ATEN_CPU_CAPABILITY": "avx2", **threads(2),
                              "OMP_WAIT_POLICY": "PASSIVE"},
}
CAPABILITIES = ("default", "avx2", "avx512")  # torch's x86 kernels, from the least
# by node id: one that names no test is an error (pytest's exit status 4), never a silent
# deselection (as `-k "not jitter"` once deselected the "unjittered" runs too)
EXPERIMENTS = [f"tests/test_training.py::{test}" for test in (
    "test_the_sweep_claims_hold[jitter1]", "test_the_warmup_claims_hold[jitter1]",
    "test_the_edge_of_training_is_chaotic_and_only_there")] + [
    "tests/test_convnet.py::test_the_convnet_claims_hold[jitter1]"]
# the experiments (Unit 4's training runs: the sweep, the warm-up, the runs at the edge,
# the ConvNet), in the configuration farthest from this machine's alone (their seconds
# count; the notebooks run them on its own)
FARTHEST = "torch generic, NumPy baseline, 1 thread"
CAPSTONE = ["tests/test_language_model.py::test_the_claims_hold[jitter1]"]
DIAGNOSIS = [f"tests/test_diagnosis.py::{test}" for test in (
    "test_a_classic_mistake_is_named_by_the_visible_check",
    "test_a_correct_variant_passes_the_visible_check")]
# Exercises 7.3 and 7.4 are Numba kernels: LLVM compiles them for this CPU, whatever kernels
# torch or NumPy are made to run, so their checks are not run again in each configuration
NOT_COMPILED = "not (ex7_3 or ex7_4 or ex9_5)"
# the measurements notebooks assert, as tests with other seeds and inputs (each configuration)
MEASUREMENTS = [
    "tests/test_layer_norm.py::test_float32_central_differences_are_best_near_the_cube_root_of_eps",
    "tests/test_transformer.py::"
    "test_the_pre_ln_stream_grows_through_the_component_all_tokens_share",
    "tests/test_network.py::test_every_kind_learns_the_spiral_from_other_seeds",
    "tests/test_network.py::test_weight_decay_claims_hold_from_other_seeds",
    "tests/test_network.py::test_the_equilibrium_claims_hold_from_other_seeds",
    "tests/test_network.py::test_the_instruments_claims_hold_from_other_seeds"]
# every notebook runs on the farthest configuration's kernels (every assert of every cell,
# not their outputs' last digits, which differ between CPUs): whole, but notebooks 04, 05
# 08 and 09 (TRAINING), which run as --execute grades them, without their cells tagged
# skip-at-grading (tools.worker.execute.skipped): their training runs (the sweep, the edge
# of stability, the ConvNet, the capstone, Unit 8's and 9's) are a minute, and their claims run
# above, perturbed (EXPERIMENTS, CAPSTONE, TODAY); their other claims run here (scale
# invariance, QK-norm's bound, your layers equal to torch's in the unit's model, adaLN-Zero
# the identity at initialization, ...). Numba is hidden from them (NO_NUMBA): LLVM compiles
# notebook 07's kernels for this CPU whatever kernels torch and NumPy run (NOT_COMPILED),
# so their cells would prove nothing new, in 8 s of compiling a run; they print that they
# are skipped, as where Numba is not installed.
TRAINING = (4, 5, 8, 9)  # the units whose notebooks run here without their experiments
NO_NUMBA = 'raise ImportError("Numba is hidden by tests/test_machines.py")\n'
# ... and on one thread, as the main run. In the AVX2 configuration, with NumPy's own
# kernels and one thread, they would differ from the main run by torch's kernel set alone,
# which the farthest configuration's differ from by more. (Every notebook in both took
# 110 s of make test's 8 minutes. Notebook 04 ran whole in the AVX2 one until 2026-11-27,
# its claims holding in every make test; the training runs' thresholds were measured on
# the AVX2 kernels too: normkit/training.py, normkit/convnet.py, normkit/modern.py. Here
# notebooks 04, 05 and 08 without their experiments take 17 s, 04 whole there took 14 s.)
NOTEBOOK_THREADS = threads(1)
# Unit 8's and Unit 9's experiments (normkit/modern.py, normkit/conditioning.py,
# normkit/equilibrium.py, normkit/logit_growth.py, normkit/depth.py), perturbed, as the
# capstone's: in the farthest configuration; their AVX2 runs were measured once, over five
# jitters (the claims' docstrings)
TODAY = [f"tests/{test}[jitter1]" for test in (
    "test_modern.py::test_the_claims_hold", "test_modern.py::test_the_placement_claims_hold",
    "test_conditioning.py::test_the_claims_hold",
    "test_scale_experiments.py::test_the_equilibrium_claims_hold",
    "test_scale_experiments.py::test_the_logit_claims_hold",
    "test_scale_experiments.py::test_the_depth_claims_hold",
    "test_scale_experiments.py::test_the_rezero_claims_hold")]
assert FARTHEST in CONFIGURATIONS  # (a name that matches none would run nothing)
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


def unmet(settings, seen, native):
    """The settings that did not take effect, as the probe saw them (seen) beside the
    machine's own configuration (native): [] when every one did. A torch capability the CPU
    lacks is met by the CPU's best (ATEN_CPU_CAPABILITY only ever lowers it)."""
    rank = {c: i for i, c in enumerate(CAPABILITIES)}
    wanted = settings["ATEN_CPU_CAPABILITY"]
    if wanted != "default" and rank[wanted] > rank.get(native["torch"], -1):
        wanted = native["torch"]
    problems = []
    if seen["torch"] != wanted:
        problems.append(f"torch runs its {seen['torch']} kernels, not {wanted}")
    if seen["threads"] != int(settings["OMP_NUM_THREADS"]):
        problems.append(f"torch runs {seen['threads']} threads, not {settings['OMP_NUM_THREADS']}")
    if "NPY_DISABLE_CPU_FEATURES" in settings and seen["numpy"]:
        problems.append(f"NumPy still dispatches to {seen['numpy']}")
    if "OPENBLAS_CORETYPE" in settings and native["openblas"] is not None and \
            seen["openblas"] == native["openblas"]:
        problems.append(f"OpenBLAS still runs {seen['openblas']}")
    return problems


def test_every_configuration_sets_every_thread_variable():
    for settings in CONFIGURATIONS.values():
        assert {settings[name] for name in threads(1)} == {settings["OMP_NUM_THREADS"]}


AVX512 = {"torch": "avx512", "threads": 1, "numpy": ["X86_V3", "X86_V4"], "openblas": "Zen"}


@pytest.mark.parametrize("settings, seen, native, expected", [
    # the AVX2 configuration where MKL_NUM_THREADS=1 won (a Sapphire Rapids machine)
    ({"ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "2"},
     {**AVX512, "torch": "avx2"}, AVX512, ["torch runs 1 threads, not 2"]),
    ({"ATEN_CPU_CAPABILITY": "avx2", **threads(2)}, {**AVX512, "threads": 2}, AVX512,
     ["torch runs its avx512 kernels, not avx2"]),  # ATEN_CPU_CAPABILITY ignored
    ({"ATEN_CPU_CAPABILITY": "avx2", **threads(2)}, {**AVX512, "torch": "default", "threads": 2},
     {**AVX512, "torch": "default"}, []),  # a CPU without AVX2: its best is met
    ({"ATEN_CPU_CAPABILITY": "avx2", **threads(2)}, {**AVX512, "torch": "avx2", "threads": 2},
     {**AVX512, "torch": "avx2"}, []),  # an AVX2 machine: another thread count
    (CONFIGURATIONS["torch generic, NumPy baseline, 1 thread"],
     {**AVX512, "torch": "default", "numpy": []}, AVX512,
     ["OpenBLAS still runs Zen"] if OLD_CORE else []),
    (CONFIGURATIONS["torch generic, NumPy baseline, 1 thread"],
     {**AVX512, "torch": "default", "numpy": ["X86_V3"], "openblas": "Prescott"}, AVX512,
     ["NumPy still dispatches to ['X86_V3']"]),
])
def test_unmet_reads_what_other_machines_report(settings, seen, native, expected):
    assert unmet(settings, seen, native) == expected


@pytest.fixture(scope="module")
def native():
    return configured({})


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_graders_and_experiments_hold_in_configuration(name, native):
    settings = CONFIGURATIONS[name]
    seen = configured(settings)
    assert unmet(settings, seen, native) == [], f"{name}: {seen}, natively {native}"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_graders.py", *DIAGNOSIS, *MEASUREMENTS,
         *(EXPERIMENTS + CAPSTONE + TODAY if name == FARTHEST else []), "-q", "-m", NOT_COMPILED,
         "-p", "no:xdist", "-p", "no:cacheprovider", "-x"],
        cwd=REPO, env={**os.environ, **settings, "COURSE_CONFIGURATION": name},
        capture_output=True, text=True)
    assert run.returncode == 0, f"{name}: {settings}\n{run.stdout[-4000:]}{run.stderr[-2000:]}"


def test_every_notebooks_asserted_claims_hold_on_the_farthest_configuration(native, tmp_path):
    """Each notebook's cells assert what they measure (a float32 step, an overflow, a
    normalization's statistics): run on the farthest CPU's kernels, whole but for the
    experiments of TRAINING's notebooks, every assert must hold. On one thread
    (NOTEBOOK_THREADS)."""
    from tools.worker import execute

    name = FARTHEST
    settings = {**CONFIGURATIONS[name], **NOTEBOOK_THREADS}
    given = tmp_path / "in"
    given.mkdir()
    for path in notebooks():
        notebook = nbformat.read(path, as_version=4)
        if unit(path) in TRAINING:
            notebook.cells = [cell for cell in notebook.cells if not execute.skipped(cell)]
        nbformat.write(notebook, given / path.name)
    assert unmet(settings, configured(settings), native) == []
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "numba.py").write_text(NO_NUMBA)
    folder = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
         "--ExecutePreprocessor.timeout=600", "--output-dir", str(folder),
         *sorted(map(str, given.iterdir()))],
        cwd=SOLUTIONS, capture_output=True, text=True,
        env={**os.environ, **settings, "PYTHONPATH": os.pathsep.join(  # (the kernels run in
            [str(hidden), str(SOLUTIONS),  # given/: solutions/ first, for its normlib)
             *filter(None, [os.environ.get("PYTHONPATH")])])})
    assert run.returncode == 0, f"{name}: {settings}\n{run.stderr[-4000:]}"
    assert sorted(p.name for p in folder.iterdir()) == [p.name for p in notebooks()]
    # a cell tagged raises-exception (it calls an exercise: a stub raises) lets Run All, and
    # nbconvert, go on past its error: an assert failing there shows only in its outputs
    errors = [(f"{path.name} cell {cell.get('id')}", f"{out['ename']}: {out['evalue']}")
              for path in sorted(folder.iterdir())
              for cell in json.loads(path.read_text())["cells"]
              for out in cell.get("outputs", []) if out["output_type"] == "error"]
    # Numba hidden: the compiled kernels' check cells, and they alone, stop at their hidden
    # tests' compile step (normkit.checks.Skipped; a student's check cell prints it instead)
    skipped = {where for where, error in errors if error.startswith("Skipped: Numba")}
    assert skipped == {f"07_kernels_and_speed.ipynb cell u7-check-7-{n}" for n in (3, 4)} | {
        "09_norms_at_scale.ipynb cell u9-check-9-5"}
    errors = [f"{where}: {error}" for where, error in errors if where not in skipped]
    assert errors == [], f"{name}: {settings}\n" + "\n".join(errors)
