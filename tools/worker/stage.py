"""A submission's notebooks staged for nbgrader's autograde in a worker's scratch course
(tools/worker/task.py): each notebook the student submitted, read within the bounds of
tools/course/bounds.py (read_bounded: its bytes and its cells, before nbformat or nbgrader
reads it), or a stand-in where it cannot be read or is over a bound (its written answers
score 0, with the reason), and the written answers of an autograded folder as the head compares
them (tools/instructor/autograde.py).
"""

import hashlib
import json
import re
from pathlib import Path

from tools.course.bounds import BOUNDS
from tools.course.exercises import of_notebooks, questions_of


class NotebookTooLarge(ValueError):
    """A submitted notebook over a bound of tools/course/bounds.py (its bytes, its cells):
    not read, as a notebook that cannot be read."""


def read_bounded(path, bounds=BOUNDS):
    """The notebook at path as nbformat reads it (version 4), once it is known to be within
    the bounds: its bytes (bounds.file_bytes) before it is read, its cells
    (bounds.notebook_cells) counted in its JSON before nbformat validates them and nbgrader
    grades them (what takes the time: 13 minutes of autograde for 100,000 cells).
    NotebookTooLarge otherwise; a file that is not JSON gets nbformat's own error."""
    import nbformat

    size = path.stat().st_size
    if size > bounds.file_bytes:
        raise NotebookTooLarge(f"{size:,} bytes, more than the {bounds.file_bytes:,} a "
                               "notebook may have")
    try:
        cells = json.loads(path.read_bytes()).get("cells")
    except (ValueError, AttributeError):  # (not JSON, or no object: nbformat says so)
        cells = None
    if isinstance(cells, list) and len(cells) > bounds.notebook_cells:
        raise NotebookTooLarge(f"{len(cells):,} cells, more than the {bounds.notebook_cells:,} "
                               "a notebook may have")
    return nbformat.read(path, as_version=4)


def answers(folder, stems):
    """{grade_id: text} of the written answers in a submission's notebooks (folder), as
    nbgrader last recorded them ({} if none)."""
    import nbformat

    found = {}
    for stem in stems:
        path = Path(folder) / f"{stem}.ipynb"
        if path.is_file():
            for cell in nbformat.read(path, as_version=4).cells:
                meta = cell.metadata.get("nbgrader", {})
                if cell.cell_type == "markdown" and meta.get("solution") and meta.get("grade"):
                    found[meta["grade_id"]] = cell.source
    return found


def stage(submitted, stems, staging, stand_in):
    """Copy a submission (submitted/<student>/<assignment>/) to staging for nbgrader: a
    notebook saved under another name put back under its own, an unreadable one replaced
    by stand_in(stem, why) (a notebook: see stand_in), a graded cell pasted twice read
    once. Returns (notes for the status, {stem: why} of the notebooks that could not be
    read)."""
    import nbformat

    notes, unreadable, ids = [], {}, {}
    staging.mkdir(parents=True)
    for path in sorted(Path(submitted).rglob("*")):
        if path.is_file() and path.suffix != ".ipynb":
            (staging / path.relative_to(submitted)).parent.mkdir(parents=True, exist_ok=True)
            (staging / path.relative_to(submitted)).write_bytes(path.read_bytes())
    for path in sorted(Path(submitted).glob("*.ipynb")):
        try:
            nb = read_bounded(path)
        except Exception as error:
            if path.stem in stems:
                unreadable[path.stem] = why = unreadable_why(path, error)
                notes.append(f"{why}: its written answers score 0 (a grader may change that "
                             "in formgrader)")
                try:  # (its page; without one the grading stands, said so)
                    nbformat.write(stand_in(path.stem, why), staging / path.name)
                except Exception as failure:
                    notes.append(f"{path.name}: no page ({type(failure).__name__} making its "
                                 "stand-in)")
            continue
        ids[path] = {c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells} - {None}
        if path.stem in stems:
            twice = dedupe(nb)
            if twice:
                notes.append(f"{path.name}: a graded cell appears twice ({', '.join(twice)}): "
                             "the later copy is read as an ordinary cell")
            nbformat.write(nb, staging / path.name)
    reference = {stem: set(ids_of(stem)) for stem in stems}
    for stem in stems:
        if (Path(submitted) / f"{stem}.ipynb").exists():
            continue
        found = [p for p, have in ids.items() if p.stem not in stems and have & reference[stem]]
        if len(found) == 1:
            (staging / f"{stem}.ipynb").write_bytes(found[0].read_bytes())
            notes.append(f"{found[0].name} graded as {stem}.ipynb")
        else:
            others = sorted(p.name for p in ids if p.stem not in stems)
            notes.append(f"no {stem}.ipynb" + (f" (found {', '.join(others)})" if others else ""))
    return notes, unreadable


def unreadable_why(path, error):
    """Why a submitted notebook could not be read, in words the status, the gradebook and
    the feedback page show: its name, the error's type, the first line of its message
    without what it quotes of the file (at most 200 characters; each character markdown,
    HTML or a spreadsheet could read as more than text is a "?") and the first 12 hex
    digits of the file's SHA-256 (which tells a grader's override of it from a later
    file's)."""
    line = re.split(r": ['\"]", (str(error).strip().splitlines() or [""])[0])[0]  # (not a
    message = re.sub(r"[^\w .,:;'()/-]", "?", line)  # quote of the file: nbformat's NotJSONError)
    message = message if len(message) <= 200 else message[:197] + "..."
    sha = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    return (f"{path.name}: not a readable notebook ({type(error).__name__}"
            f"{': ' + message if message else ''}; file {sha})")


def stand_in(root, assignment, stem, why):
    """The notebook nbgrader records in place of a submitted one that cannot be read
    (why): a note saying so, then each graded cell of the course's notebook, in its order
    (source/<assignment>/<stem>.ipynb of the scratch course at root), as nbgrader's
    gradebook holds it (OverwriteCells.missing_cell_transform: a check's code with its
    hidden tests, folded before anything leaves; a written answer as released), each
    written answer's text replaced by a line saying it could not be read. Its checks get
    the judge's verdicts, as any submission's (the judge graded the submission's files),
    and its page shows them; its answers score 0 (tools/instructor/autograde.save)."""
    import nbformat
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import OverwriteCells

    source = nbformat.read(Path(root) / "source" / assignment / f"{stem}.ipynb", as_version=4)
    order = {c.metadata.nbgrader["grade_id"]: bool(c.metadata.nbgrader.get("solution"))
             for c in source.cells if c.metadata.get("nbgrader", {}).get("grade")}
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": source.metadata.get("kernelspec", {}),
                                            "language_info": source.metadata.get(
                                                "language_info", {})})
    nb.cells.append(nbformat.v4.new_markdown_cell(
        f"**This notebook could not be read**: {why}. Your code (`normlib/`) was graded all "
        "the same: below, each check with the judge's verdict. Your written answers could "
        "not be read: each scores 0. Resubmit the notebook as JupyterLab saves it "
        "(File > Save Notebook), or ask your instructor.", id="feedback-unreadable"))
    add = OverwriteCells(missing_cell_notification="")
    with Gradebook(f"sqlite:///{Path(root) / 'gradebook.db'}") as gb:
        for grade_id, answer in order.items():
            new = add.missing_cell_transform(
                gb.find_source_cell(grade_id, stem, assignment),
                gb.find_graded_cell(grade_id, stem, assignment).max_score, is_solution=answer)
            if answer:
                new.source = f"[feedback: not read: {why}]"
            new.id = grade_id[:64]
            nb.cells.append(new)
    return nb


def dedupe(nb):
    """Strip the nbgrader metadata of every graded cell after the first with its grade id
    (a cell copied and pasted in JupyterLab), which nbgrader cannot grade; their ids."""
    seen, twice = set(), []
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is not None and grade_id in seen:
            del cell.metadata["nbgrader"]
            twice.append(grade_id)
        seen.add(grade_id)
    return sorted(set(twice))


def ids_of(stem):
    """The grade ids of a course notebook's graded cells (checks and written answers)."""
    return [e.grade_id for e in of_notebooks([stem])] + [q.grade_id for q in questions_of([stem])]


