"""The judge's verdicts into nbgrader's autograde (registered in nbgrader_config.py). At
autograde, no student code runs in nbgrader's process or in a kernel by default: the
judge has graded the submission's normlib files first (tools/judge/client.py, run by the
grading task of tools/worker/task.py before it runs nbgrader's autograde), and

- Judged writes each check's verdict into its cell's metadata ("judge"), where the
  feedback page shows it (tools/instructor/templates/judged) and no output of the
  notebook can stand;
- FoldHiddenTests keeps each check cell's hidden tests folded: they never exist in a
  process that runs student code;
- JudgedAutoGrades is nbgrader's SaveAutoGrades for the written answers only: a check's
  score is the judge's, which tools/instructor/autograde.py writes, and nothing the
  notebook holds (its outputs are the student's, as submitted) can change it.
"""

import json
from pathlib import Path

from nbgrader.preprocessors import NbGraderPreprocessor, SaveAutoGrades
from traitlets import Unicode

from tools.course.markers import fold_hidden
from tools.judge.client import JUDGE


class Judged(NbGraderPreprocessor):
    """Each check cell's verdict, from the judge's file (tools/worker/task.py writes it before
    nbgrader runs: {assignment: {student: {grade_id: [passed, text]}}}), into the
    cell's metadata ("judge"), and that key out of every other cell (a submission's
    notebook may carry one). The feedback page shows it (tools/instructor/templates/judged)."""

    verdicts = Unicode("", help="The judge's verdicts (a JSON file)").tag(config=True)

    def preprocess(self, nb, resources):
        found = json.loads(Path(self.verdicts).read_text()) if self.verdicts else {}
        info = resources["nbgrader"]
        self._found = found.get(info["assignment"], {}).get(info["student"], {})
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        cell.metadata.pop("judge", None)
        if is_check(cell):
            passed, text = self._found.get(cell.metadata.nbgrader.grade_id,
                                           (False, f"{JUDGE} no verdict (not graded)"))
            cell.metadata["judge"] = {"passed": bool(passed), "verdict": text}
        return cell, resources


class JudgedAutoGrades(SaveAutoGrades):
    """nbgrader's SaveAutoGrades for every graded cell but the checks, whose score is the
    judge's (written by tools/instructor/autograde.py, never read from the notebook's outputs)."""

    def _add_score(self, cell, resources):
        if not is_check(cell):
            super()._add_score(cell, resources)


def is_check(cell):
    """Whether a notebook cell is a check (nbgrader's autograder tests)."""
    return cell.cell_type == "code" and bool(cell.metadata.get("nbgrader", {}).get("grade"))


class FoldHiddenTests(NbGraderPreprocessor):
    """At autograde, before the notebook runs: in every check cell (as nbgrader restored
    it, hidden tests included) the hidden-test block becomes one comment line. The
    student's kernel runs the visible checks alone, so the hidden tests never exist in a
    process that runs student code (no `In`, frame, profiler or /proc read can show them);
    the judge runs them all (tools/judge/client.py, before nbgrader), and its score is the grade."""

    def preprocess_cell(self, cell, resources, index):
        if is_check(cell):
            cell.source = fold_hidden(cell.source)
        return cell, resources


