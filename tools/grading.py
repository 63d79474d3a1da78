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


class HideHiddenTests(NbGraderPreprocessor):
    """At generate_feedback, in every check cell: the hidden-test block becomes one comment
    line, and an error keeps its type and message but loses its traceback (whose context
    lines would quote the hidden tests). The student still reads which check failed and
    why: the checks' messages name the case (shape, dtype, arguments) and the difference.
    To show the hidden tests, set `c.HideHiddenTests.enabled = False`."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not cell.metadata.get("nbgrader", {}).get("grade"):
            return cell, resources
        lines, kept, hidden = cell.source.splitlines(), [], None
        for line in lines:
            if line.strip() == "### BEGIN HIDDEN TESTS":
                hidden = 0
            elif line.strip() == "### END HIDDEN TESTS":
                kept.append(f"# ... {hidden} lines of hidden tests, not shown ...")
                hidden = None
            elif hidden is None:
                kept.append(line)
            else:
                hidden += 1
        cell.source = "\n".join(kept)
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output.traceback = [f"{output.ename}: {output.evalue}"]
        return cell, resources
