"""Re-grade submissions in a clean process, and report where nbgrader's score disagrees.

nbgrader runs a student's notebook top to bottom, so a student's cell that runs before a
check can patch what the check calls (normlib.testing.assert_close, numpy, torch) and
earn points for wrong code. This re-runs every check cell of the course (hidden tests
included, as solutions/ has them) on the student's normlib exercise files alone, in a
fresh Python process per submission that runs no cell of the student's notebooks, and
lists every check whose clean result and gradebook score disagree. The clean score counts.

    python -m tools.recheck COURSE_ROOT [STUDENT ...]     after `nbgrader autograde`

What the clean process protects: it imports the student's exercise files (so their
module-level code runs, as at autograde) beside the course's own copies of every other
normlib file, and nothing else of the submission. It does not sandbox that code.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from tools.check import run
from tools.course import ASSIGNMENT, REPO, graded_cells, student_files

CELL_TIMEOUT = 30  # seconds per check cell, as nbgrader_config.py gives nbgrader's cells


def _timeout(signum, frame):
    raise TimeoutError(f"the check ran over {CELL_TIMEOUT} s")


def run_all():
    """In the clean process: run every check, {grade_id: True if it passed}."""
    signal.signal(signal.SIGALRM, _timeout)
    passed = {}
    for _, grade_id, _, source in graded_cells():
        signal.alarm(CELL_TIMEOUT)
        try:
            passed[grade_id] = run(source, f"<{grade_id}>")[0] == "pass"
        finally:
            signal.alarm(0)
    return passed


def clean_results(root, student):
    """{grade_id: passed} for one submission of the course at root, from a fresh process
    whose normlib is the course's with the student's exercise files in place."""
    submission = Path(root) / "submitted" / student / ASSIGNMENT
    grade_ids = [grade_id for _, grade_id, _, _ in graded_cells()]
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(Path(root) / "source" / ASSIGNMENT / "normlib", Path(tmp) / "normlib")
        for rel in student_files():
            if (submission / rel).is_file():  # a missing file: the reference's stays out
                shutil.copy2(submission / rel, Path(tmp) / rel)
            else:
                (Path(tmp) / rel).write_text("raise ImportError('not submitted')\n")
        # cwd first on sys.path: `import normlib` is this folder's; the repository (for
        # `tools`) comes after it
        code = "import json, tools.recheck as r; print(json.dumps(r.run_all()))"
        try:
            result = subprocess.run([sys.executable, "-c", code], cwd=tmp, capture_output=True,
                                    text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                                    timeout=CELL_TIMEOUT * (len(grade_ids) + 1))
        except subprocess.TimeoutExpired:  # stuck where no alarm reaches (C code)
            return dict.fromkeys(grade_ids, False)
    if result.returncode != 0:  # the process died (sys.exit, os._exit, a crash): no points
        return dict.fromkeys(grade_ids, False)
    return json.loads(result.stdout.strip().splitlines()[-1])


def disagreements(root, student):
    """(grade_id, notebook score, clean score) of every check where the two differ."""
    from nbgrader.api import Gradebook

    passed = clean_results(root, student)
    rows = []
    with Gradebook(f"sqlite:///{Path(root) / 'gradebook.db'}") as gb:
        for notebook, grade_id, points, _ in graded_cells():
            score = gb.find_grade(grade_id, notebook, ASSIGNMENT, student).score
            clean = points if passed[grade_id] else 0
            if score != clean:
                rows.append((grade_id, score, clean))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", help="the nbgrader course folder (autograde has run)")
    parser.add_argument("students", nargs="*", help="default: every submitted student")
    args = parser.parse_args(argv)
    students = args.students or sorted(p.name for p in (Path(args.root) / "submitted").iterdir())
    flagged = 0
    for student in students:
        for grade_id, score, clean in disagreements(args.root, student):
            flagged += 1
            print(f"{student}: {grade_id} scored {score} in the notebook, {clean} clean")
    print(f"{len(students)} submissions re-checked, {flagged} disagreements (the clean score "
          "counts)")
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main())
