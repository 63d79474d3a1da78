"""Feedback: one HTML page per notebook of each graded submission, and one zip per
student and assignment to upload to an LMS.

    python -m tools.instructor feedback ROOT [ASSIGNMENT ...] [--exchange]

feedback/<student>/<assignment>/<notebook>.html: the notebook as submitted, each check
with the judge's verdict under it (tools/templates/judged), its hidden tests folded
(tools.preprocessors.HideHiddenTests), written answers with their grade or "not yet
graded". Nothing else: nbgrader would copy every file of the graded folder beside the
pages (the course's normlib/ files among them), so every other file is removed.
feedback_zips/<assignment>/<student>.zip: that student's pages of the assignment.
"""

import zipfile
from pathlib import Path

from tools.course import assignment_names, run, targets


def feedback(root, names=(), exchange=False):
    root = Path(root)
    names = assignment_names(root, names)
    for target in targets(root, names):
        run(root, "generate_feedback", target, "--force")
    for name in names:
        for path in root.glob(f"feedback/*/{name}/**/*"):
            if path.is_file() and path.suffix != ".html":
                path.unlink()
        for path in sorted(root.glob(f"feedback/*/{name}/**/"), reverse=True):
            if path.is_dir() and not any(path.iterdir()):
                path.rmdir()
        zips = root / "feedback_zips" / name
        zips.mkdir(parents=True, exist_ok=True)
        students = sorted(p.parent.name for p in root.glob(f"feedback/*/{name}") if p.is_dir())
        for student in students:
            pages = sorted((root / "feedback" / student / name).glob("*.html"))
            with zipfile.ZipFile(zips / f"{student}.zip", "w", zipfile.ZIP_DEFLATED) as z:
                for page in pages:
                    z.write(page, f"{name}/{page.name}")
        if exchange:
            run(root, "release_feedback", name)
        print(f"feedback for {name}: feedback/*/{name}/, one zip per student in "
              f"feedback_zips/{name}/ ({len(students)})")
