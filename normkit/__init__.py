"""normkit: the course's code, which you import but never edit or submit (your code is
normlib/). At grading, the course's copy is used whatever your folder holds.

- ``normkit.checks``          each exercise's visible checks: ``check("1.1")`` in a notebook
- ``normkit.testing``         what the checks compare against: exact references, the error
                              model's tolerances, assert_close
- ``normkit.diagnosis``       why a check failed: the likely cause of a wrong value
- ``normkit.notebook``        the notebooks' IPython extension: a stub or a failed check
                              shows as one short message, not a traceback
- ``normkit.validation``, ``normkit.channels``: exercise files written before 2026-12-07
                              import normlib's provided _validation and _channels from here
- ``normkit.gradcheck``       a central-difference gradient checker for NumPy functions
- ``normkit.training``        the training experiments of Units 4 and 5, and their claims
- ``normkit.grad_norms``      Unit 5's gradient norms at initialization, Post-LN against
                              Pre-LN (Xiong et al. 2020)
- ``normkit.network``         Unit 4's network trained by hand: data, parameters, loss, SGD,
                              the same network in torch, weight decay and the instruments
- ``normkit.convnet``         Unit 4's ConvNet at batch size 2 and 32, and its claims
- ``normkit.language_model``  Unit 5's capstone: a character-level language model
- ``normkit.benchmark``       `make bench`: the LayerNorm kernels timed against torch
- ``normkit.sync_batch_norm`` SyncBatchNorm's statistics as a merge of Welford states
                              (notebook 06, section 1)
"""
