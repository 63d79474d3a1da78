"""A student's first hour, in a real browser: `make lab` on a temporary copy of the course,
driven by Playwright in headless Chromium, asserted from the page.

1. The lab opens on notebooks/.
2. Notebook 01 opens with the Python kernel, and its formulas render (MathJax).
3. Run All on the stubs runs every code cell: each unfinished check says in one line that
   its exercise is not yet implemented, and the figures still show.
4. With the reference normlib/ dropped in, Run All passes every check, and once the written
   question has an answer Validate says the notebook passes.
5. No broken panel: no Nbgrader menu, no news pop-up.

Each step saves a screenshot; `make screenshots` copies them to docs/screenshots/
(COURSE_SCREENSHOTS). Without Chromium (/usr/bin/chromium, or COURSE_CHROMIUM) the test is
skipped, unless COURSE_REQUIRE_BROWSER=1 (CI) makes that a failure.
"""

import contextlib
import json
import os
import re
import shutil
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from tests.conftest import REPO
from tests.test_lab import STUDENT_OFF, TOKEN, get, redirect, serving

CHROMIUM = Path(os.environ.get("COURSE_CHROMIUM", "/usr/bin/chromium"))
NOTEBOOK = "01_layernorm_forward.ipynb"
COPIED = ("Makefile", "pyproject.toml", "nbgrader_config.py", "notebooks", "normkit", "normlib",
          "tools")
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the open notebook
TIMEOUT_MS = 60_000  # any one wait; the whole test takes about 30 s on 2 cores


def chromium_or_skip():
    if CHROMIUM.exists():
        return
    message = (f"no Chromium at {CHROMIUM}: install it (Debian/Ubuntu: apt-get install "
               "chromium) or set COURSE_CHROMIUM to a Chromium binary to run the browser test")
    if os.environ.get("COURSE_REQUIRE_BROWSER") == "1":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """`make lab` on a copy of the student edition, as a student clones it (the kernel
    imports the copy's normlib/), with this repository's environment, taken as up to date
    whatever the file times (else make would install the copy into it): (the copy, the
    port). One server for this file's tests."""
    root = tmp_path_factory.mktemp("student") / "course"
    root.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints")
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=ignore)
        else:
            shutil.copy2(source, root / name)
    venv = REPO / ".venv"  # (never reinstalled from the copy, which would point it there)
    with serving("lab", root, f"VENV={venv}", f"--assume-old={venv / '.installed'}",
                 env={"PYTHONPATH": str(root)}) as port:
        yield root, port


def test_make_lab_serves_the_course(lab):
    """The server's side (no browser needed): / leads to notebooks/, nbgrader's panels that
    do not work for a student are off, Validate is on, the formgrader is unreachable."""
    _, port = lab
    status, body = get(port, "/api/contents/notebooks")
    assert status == 200 and NOTEBOOK in body
    status, location = redirect(port, "/")
    assert status == 302 and location.startswith("/lab/tree/notebooks"), location
    status, page = get(port, "/lab")
    assert status == 200
    disabled = re.search(r'"disabledExtensions": \[([^\]]*)\]', page).group(1)
    for plugin in STUDENT_OFF:  # what does not work for a student on their own
        assert f'"{plugin}"' in disabled, plugin
    assert '"@jupyter/nbgrader:validate-assignment"' not in disabled
    assert get(port, "/formgrader")[0] == 404  # the server extension is off


def code_cells(page):
    """Each code cell's (prompt, output text) of the open notebook, read with textContent
    (cells outside the viewport have no innerText)."""
    return page.eval_on_selector_all(
        f"{PANEL} .jp-CodeCell",
        "cells => cells.map(c => [c.querySelector('.jp-InputPrompt').textContent.trim(),"
        " (c.querySelector('.jp-OutputArea') || {textContent: ''}).textContent])")


def run_all(page):
    """Run > Run All Cells, then wait until every code cell has run: each prompt shows its
    execution count ([*]: while queued or running)."""
    page.click(".lm-MenuBar-itemLabel:text-is('Run')")
    page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
    page.wait_for_function(
        "() => { const p = [...document.querySelectorAll("
        f"'{PANEL} .jp-CodeCell .jp-InputPrompt')];"
        " return p.length > 0 && p.every(e => /^\\[\\d+\\]:$/.test(e.textContent.trim())); }",
        timeout=TIMEOUT_MS, polling=250)  # (not every frame: the kernel needs the CPU)
    return code_cells(page)


def checks(path):
    """The indexes, among the code cells, of the notebook's graded check cells."""
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    return [i for i, c in enumerate(cells) if c["metadata"].get("nbgrader", {}).get("grade")]


def answer_written_questions(page):
    """Type an answer into each written question's cell (Validate wants one)."""
    questions = page.locator(f"{PANEL} .jp-MarkdownCell:has-text('YOUR ANSWER HERE')")
    for _ in range(questions.count()):
        questions.first.click()  # select the cell,
        page.keyboard.press("Enter")  # edit its markdown source
        page.wait_for_selector(".jp-MarkdownCell.jp-mod-active .cm-editor.cm-focused")
        page.keyboard.press("Control+A")
        page.keyboard.type("An answer written in the browser test.")
        page.keyboard.press("Control+Enter")  # render it
    assert questions.count() == 0


def shoot(page, folder, name, locator=None):
    """A screenshot of the page, scrolled to locator first if given (and once it is in the
    viewport and painted: JupyterLab renders the cells outside the viewport lazily)."""
    if locator is not None:
        from playwright.sync_api import expect

        for attempt in range(3):  # cells above may still grow (outputs arriving) and push it
            locator.scroll_into_view_if_needed()  # back out of view: scroll again
            try:
                expect(locator).to_be_in_viewport()
                break
            except AssertionError:
                if attempt == 2:
                    raise
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    path = folder / f"{name}.png"
    page.screenshot(path=str(path))
    main = matplotlib.image.imread(path)[100:-40, 300:-50]  # (H, W, RGBA): the main area
    colours = len(np.unique(main.reshape(-1, main.shape[-1]), axis=0))
    assert colours > 100, f"{name}: the main area is blank ({colours} colours)"


def test_a_students_first_hour(lab, tmp_path):
    chromium_or_skip()
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    course, port = lab
    shots = tmp_path / "screenshots"
    shots.mkdir()
    graded = checks(course / "notebooks" / NOTEBOOK)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(TIMEOUT_MS)

        # 1. The lab opens on notebooks/ (the address a student is given, and its file list).
        page.goto(f"http://127.0.0.1:{port}/?token={TOKEN}&reset")
        page.wait_for_selector(".jp-DirListing-item")
        assert re.search(r"/lab/tree/notebooks/?(\?|$)", page.url), page.url
        assert page.text_content(".jp-BreadCrumbs").strip("/ ") == "notebooks"
        page.wait_for_selector(f".jp-DirListing-item:has-text('{NOTEBOOK}')")
        shoot(page, shots, "1-lab-opens-on-notebooks")

        # 2. Notebook 01 with the Python kernel; the formulas render.
        page.dblclick(f".jp-DirListing-item:has-text('{NOTEBOOK}')")
        page.wait_for_selector(f"{PANEL} mjx-container")
        # its kernel named and idle (on a loaded machine the indicator may say idle while
        # the session has no kernel yet: "No Kernel")
        with contextlib.suppress(PlaywrightTimeout):  # (then the assertion says which)
            page.wait_for_function(
                f"() => document.querySelector('{PANEL} .jp-KernelName')?.textContent"
                f".includes('Python') && document.querySelector('{PANEL} "
                ".jp-Notebook-ExecutionIndicator')?.getAttribute('data-status') === 'idle'",
                polling=250)
        kernel = page.text_content(f"{PANEL} .jp-KernelName")
        assert "Python" in kernel, kernel
        shoot(page, shots, "2-notebook-01")

        # 3. Run All on the stubs: every code cell runs.
        cells = run_all(page)
        outputs = [text for _, text in cells]
        for i in graded:
            assert "is not yet implemented" in outputs[i] and "Traceback" not in outputs[i], \
                outputs[i]
        unfinished = [text for text in outputs if "NotImplementedError" in text]
        assert all("not yet implemented" in text for text in unfinished), unfinished
        assert "max_error is not yet implemented" in "".join(outputs)  # the "your turn"
        assert page.locator(f"{PANEL} .jp-RenderedImage img").count() >= 1
        check = page.locator(f"{PANEL} .jp-CodeCell").nth(graded[0]).locator(".jp-OutputArea")
        shoot(page, shots, "3-run-all-on-the-stubs", check)

        # 4. A classic mistake, the unbiased variance in 1.1's statistics: its check names
        # the cause, and 1.2's, whose forward calls those statistics, says that 1.1 fails.
        reference = (REPO / "solutions" / "normlib" / "layer_norm.py").read_text()
        mistaken = reference.replace("var = (xc * xc).mean(axis=axes, keepdims=True)",
                                     "var = x.var(axis=axes, keepdims=True, ddof=1)")
        assert mistaken != reference
        (course / "normlib" / "layer_norm.py").write_text(mistaken)
        cells = run_all(page)
        first, second = (cells[i][1] for i in graded[:2])
        assert "Likely cause: the unbiased variance" in first and "Traceback" not in first, first
        assert ("Your layer_norm_forward calls layer_norm_stats (Exercise 1.1), which fails "
                "its check too") in second and "Traceback" not in second, second
        shoot(page, shots, "4-a-mistake-named", check)

        # 5. The reference normlib/ dropped in (autoreload picks it up), Run All, Validate.
        for path in (REPO / "solutions" / "normlib").glob("*.py"):
            shutil.copy(path, course / "normlib" / path.name)
        cells = run_all(page)
        for i in graded:
            assert "the visible checks pass" in cells[i][1], cells[i][1]
        shoot(page, shots, "5-checks-pass", check)
        answer_written_questions(page)
        page.click(f"{PANEL} .jp-Toolbar :text-is('Validate')")
        dialog = page.wait_for_selector(".jp-Dialog-content:has-text('Success')",
                                        timeout=TIMEOUT_MS)
        assert "Your notebook passes all the tests" in dialog.text_content()
        shoot(page, shots, "6-validate")
        page.click(".jp-Dialog-button:has-text('OK')")

        # 6. No broken panel: no Nbgrader menu (its panels are the formgrader's, the course
        # list and the assignment list, none of which works here), no news pop-up.
        menus = page.eval_on_selector_all(".lm-MenuBar-itemLabel",
                                          "e => e.map(x => x.textContent)")
        assert "Run" in menus and "Nbgrader" not in menus, menus
        body = page.text_content("body")
        for broken in ("Error fetching courses", "no available formgrader services",
                       "exchange directory does not exist", "official Jupyter news"):
            assert broken not in body
        browser.close()

    if os.environ.get("COURSE_SCREENSHOTS"):
        out = Path(os.environ["COURSE_SCREENSHOTS"])
        out.mkdir(parents=True, exist_ok=True)
        for shot in sorted(shots.glob("*.png")):
            shutil.copy(shot, out / shot.name)
