"""nbgrader preprocessors of the course (registered in nbgrader_config.py).

SkipAtGrading: at autograde, cells tagged `skip-at-grading` (the long experiments, such
as Unit 4's training runs) are replaced by a comment instead of being run: the graded
cells import what they use and never depend on them, and running them for every
submission would cost the class minutes. Cells with nbgrader grade or solution metadata
are always run, whatever their tags (a student could tag a check cell to skip it).
"""

from nbgrader.preprocessors import NbGraderPreprocessor

TAG = "skip-at-grading"
SKIPPED = "# (an experiment: not run at grading; run it in the notebook)"


class SkipAtGrading(NbGraderPreprocessor):  # (nbconvert's base class is disabled by default)
    def preprocess_cell(self, cell, resources, index):
        nbgrader = cell.metadata.get("nbgrader", {})
        graded = nbgrader.get("grade") or nbgrader.get("solution") or nbgrader.get("locked")
        if cell.cell_type == "code" and TAG in cell.metadata.get("tags", []) and not graded:
            cell.source = SKIPPED
            cell.outputs = []
        return cell, resources
