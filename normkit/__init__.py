"""normkit: the course's code, which you import but never edit or submit (yours is normlib/).

At grading the course's copy is used, whatever your folder holds. The modules:
- ``normkit.checks``      each exercise's visible checks: ``check("1.1")`` in a notebook
- ``normkit.testing``     the exact references, the error model's tolerances, assert_close
- ``normkit.diagnosis``   why a check failed: the likely cause of a wrong value
- ``normkit.notebook``    the notebooks' IPython extension: short messages, not tracebacks
- ``normkit.gradcheck``   a central-difference gradient checker for NumPy functions
- ``normkit.kernel_code`` what a Numba kernel's code shows: races, fastmath, its prange loop
- the experiments: ``normkit.training`` (Units 4 and 5), ``normkit.network`` and
  ``normkit.convnet`` (Unit 4), ``normkit.grad_norms`` and ``normkit.language_model`` (Unit
  5), ``normkit.sync_batch_norm`` (Unit 6), ``normkit.benchmark`` (`make bench`) and
  ``normkit.triton_layer_norm`` (Unit 7), ``normkit.modern``, ``normkit.conditioning`` (8)
- ``normkit.validation``, ``normkit.channels``: for exercise files of before 2026-12-07
"""
