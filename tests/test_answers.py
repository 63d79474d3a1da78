"""The student derives: no graded answer appears before its check. The student edition's
notebooks, read in course order up to each exercise's check cell, and the normlib/ files
students write (stubs and the code beside them) hold neither the code nor the closed form an
exercise asks for; nor does any output (the stored ones before each check, and a Run All of
the student edition on its stubs). After its check, in the rest of its section, an answer
is shown only in a collapsed block (<details>, or a code cell whose source is hidden).
(normkit/testing.py, the checks' comparison code, computes exact results and is not read.)

ANSWERS: patterns of each derived answer in code, LaTeX and prose, as regular expressions
matched with all whitespace and LaTeX spacing removed. DEFINITIONS: the exercises whose
formula is the definition, taught before them on purpose, with why. Every exercise is in
exactly one of the two. STEPS: derivations that are not graded exercises (a "your turn"
cell checked by a code cell), by that check cell's id, under the same rules, normkit/
included (the notebooks send the student to read it).
"""

import json
import re

import nbformat
import pytest
from jupyter_client import KernelManager
from nbclient import NotebookClient

from tools.course.exercises import REPO, SOLUTIONS, exercises, notebooks, student_files

ANSWERS = {
    "1.1": [  # the group's axes built from normalized_shape, for any number of dims
        r"range\([\w.]*ndim-len\(normalized_shape\)", r"range\(-len\(normalized_shape\)",
        r"range\(-1,-len\(normalized_shape\)-1,-1\)",
    ],
    "2.1": [  # the staged table's gradients, assembled
        r"d\\mu=-\\sumdx_c", r"dx_c\\mathrel\{\+\}=\\tfrac\{2\}\{N\}", r"dmu=-dxc\.sum\(",
        r"dx=dxc\+dmu/", r"dvar=-0\.5\*\(var\+eps\)\*\*-1\.5\*drstd", r"dvar=-0\.5\*rstd\*\*3",
        r"dxc=dxc\+2/N\*xc\*dvar", r"dxc=grad_output\*rstd\+",
    ],
    "2.2": [  # the compact formula
        r"g-\\overline\{g\}-\\hat\{x\}", r"\(g-g_mean-x_hat\*gx_mean\)",
        r"g-mean\(g\)-x_hat\*mean\(g\*x_hat\)", r"\(g-g\.mean\([^)]*\)-x_hat\*\(g\*x_hat\)\.mean",
    ],
    "2.3": [  # the Jacobian's closed form
        r"I-\\tfrac\{1\}\{N\}\\mathbf\{1\}\\mathbf\{1\}\^\\top", r"I-11ᵀ/N", r"x̂x̂ᵀ/N",
        r"torch\.eye\(\w+\)-torch\.outer\(ones,ones\)", r"eye-1\.0/n-outer/n",
    ],
    "2.4": [  # what .sum().backward() gives the two bugs
        r"dx=\\mathrm\{rstd\}\\cdot\\mathbf\{1\}", r"detachedmeangives\$\\mathrm\{rstd\}",
        r"detachedmean.{0,20}rstd\*?1", r'"detachedmean":np\.broadcast_to\(rstd',
        r"ones\(=\.sum\(\)\)detachedvariancemax\|dx-torch's\|=<1e-12",  # the run's output
    ],
    "3.2": [  # Unit 2's compact formula, over any axes
        r"rstd\*\(g-g\.mean\(axis=axes", r"\(g\*x_hat\)\.mean\(axis=axes",
        r"rstd\*\(g-mean\(g\)-x_hat\*mean\(g\*x_hat\)\)",
    ],
    "3.7": [  # RMSNorm's compact backward and its Jacobian
        r"\\mathrm\{rrms\}\\Big\(g_j-\\hat\{x\}_j", r"rrms\*\(g-x_hat\*\(g\*x_hat\)\.mean",
        r"rrms\*\(g-x_hat\*mean\(g\*x_hat\)\)", r"\\mathrm\{rrms\}\(I-\\tfrac1N",
        r"-\\frac\{\\mathrm\{rrms\}\^3x_j\}\{N\}\\sum",
    ],
    "3.8": [  # BatchNorm's backward, in evaluation mode above all
        r"twomeantermsvanish", r"dx=\\mathrm\{rstd\}\\cdotg", r"dx_eval=dy\*weight/np\.sqrt",
        r"returng\*rstd,dweight,dbias", r"dx=g\*rstd#\(N,C,\*\)",
    ],
    "4.2": [  # a linear layer's weight gradient, summed over the batch: dz^T x
        r"\"linear\.weight\"\]?[:=]dz\.T@", r"\"linear\.weight\":grad_logits\.T@",
        r"dW=dz\^\\topx",
    ],
    "5.4": [  # the final norm's gain is its rstd
        r"gainis\$\\mathrm\{rstd\}", r"\$J\$is\$\\mathrm\{rstd\}\$timesaprojection",
        r"returntorch\.rsqrt\(var\+eps\)#\(\*B,\)", r"\\lVertJ\\rVert_?2?=\\mathrm\{rstd\}",
    ],
    "8.3": [  # DyT's gradients: alpha's factor in dx, x's in dalpha, summed over everything
        r"alpha\*g,\(?g\*x\)?\.sum\(", r"\(1-t\*t\)\*x", r"x\*\(1-t\*\*2\)",
        r"\\alpha\\,?g\\odot\\gamma\\odot\(1-\\tanh\^2",
        r"\\sum_?\{?i?\}?g_i\\gamma_i\(1-\\tanh\^2\(\\alphax_i\)\)x_i",
    ],
    "9.1": [  # the angle read off the chord and its complement, not arccos
        r"2\*np\.arctan2\(np\.linalg\.norm\(\w+-\w+\)", r"2\*math\.atan2\(",
        r"2\\arctan", r"2\\operatorname\{atan2\}",
    ],
    "9.3": [  # z-loss's gradient: 2 c z / M times the softmax
        r"\(2\*coefficient/rows\)\*z\*", r"\\frac\{2c\}\{M\}zp",
        r"2\*coefficient\*z\*\(?p", r"2cz/M",
    ],
    "9.4": [  # the gain goes into the weight's columns: W diag(g)
        r"=weight\*gain", r"linear\.weight\*norm\.weight", r"W\\mathrm\{diag\}\(g\)",
        r"W_\{ij\}g_j", r"W·diag\(g\)",
    ],
    "6.2": [  # Chan, Golub and LeVeque's merge of M2
        r"\\delta\^2\\frac\{n_an_b\}\{n\}", r"delta\^2\*count_a\*count_b/count",
        r"delta\*\*2\*\w+\*\w+/\w+",
    ],
}
DEFINITIONS = {
    "1.2": "LayerNorm's formula is the unit's subject, stated in section 1",
    "2.5": "a torch.autograd.Function's contract (what forward saves, one gradient per "
           "argument) is the specification",
    "3.1": "Unit 1's standardization, over given axes",
    "3.3": "BatchNorm's definition and torch's running-statistics rule are the specification",
    "3.4": "GroupNorm's definition: which axes, after which reshape",
    "3.5": "InstanceNorm's definition and torch's running-statistics rule",
    "3.6": "RMSNorm's definition, with torch's eps=None",
    "4.1": "the network's wiring (linear, norm, ReLU, from the student's own kernels) is "
           "its definition, stated in the section",
    "5.1": "the Post-LN and Pre-LN blocks are the definitions being compared",
    "5.2": "the encoder layer's wiring, from the two blocks' definitions",
    "5.3": "a stack of layers, with Pre-LN's final norm as its definition",
    "5.5": "the profile's definition (each layer's Frobenius norm of dLoss/dW2) is the "
           "specification; the exercise is computing it with autograd",
    "6.1": "Welford's update is the named algorithm's definition; the exercise is its "
           "vectorized float32 implementation",
    "6.3": "the recipe (upcast, compute in float32, round once) is the specification",
    "6.4": "the same recipe for RMSNorm",
    "7.1": "the fast forward computes Exercise 1.2's formula; the exercise is its memory traffic",
    "7.2": "the fast backward computes Exercise 2.2's formula, revealed after 2.2's check; "
           "the exercise is its memory traffic",
    "7.3": "the compiled forward computes Exercise 1.2's formula; the exercise is the fused, "
           "parallel loop over rows",
    "7.4": "the compiled backward computes Exercise 2.2's formula; the exercise is the fused "
           "loop and the two-stage reduction that section 7 motivates",
    "6.5": "dweight and dbias are Exercise 2.2's sums; the exercise is where they accumulate "
           "(float32) and what they are returned in",
    "8.1": "QK-norm's definition (an RMSNorm with a gain on each head's query and key, "
           "before the dot product) is stated in section 1; the exercise is its wiring",
    "8.2": "DyT's definition, gamma * tanh(alpha x) + beta, is the paper's, stated in section 2",
    "8.4": "a torch.autograd.Function's contract (what forward saves, one gradient per "
           "argument) is the specification, as in 2.5",
    "9.5": "the fused kernel computes Exercise 3.6's RMSNorm of the stream, stated in section "
           "5 with vLLM's kernel; the exercise is the one visit of each row, as 7.3's",
    "9.2": "ReZero's block is the paper's definition, x + alpha F(x) with alpha at 0, "
           "stated in section 2 before the exercise; the exercise is its wiring, and the "
           "gradients at initialization the student derives are asserted by the check and "
           "derived only after it",
    "8.5": "adaLN-Zero's block is DiT's definition, stated with its formulas and its zero "
           "initialization in section 4 before the exercise; the exercise is its wiring (the "
           "chunks' order and broadcasting, the gates), and the gradients at initialization "
           "the student derives are asserted by the check and explained only after it",
}
STEPS = {  # derivation: (notebook, the id of its check cell, patterns of its answer)
    "SGD's equilibrium norm behind a norm, and its effective learning rate": (
        "04_why_normalization_helps.ipynb", "decay-equilibrium-check", [
            r"lr\*c\*\*2/\(2\*weight_decay\)", r"sqrt\(2\*lr\*weight_decay\)/c",
            r"\|W\|\^4=lrc\^2/\(2wd\)", r"sqrt\(2lrwd\)/c",
            r"\\frac\{\\text\{lr\}c\^2\}\{2\\lambda\}",
            r"\\frac\{\\sqrt\{2\\text\{lr\}\\lambda\}\}\{c\}",
        ]),
}
EDITION = REPO / "notebooks"
STUBS = REPO / "normlib"


def flat(text):
    """text without whitespace and LaTeX's spacing commands (\\, \\; \\! \\quad): what the
    patterns are matched against."""
    return re.sub(r"\s+|\\[,;:!]|\\q?quad", "", text)


def found_in(text, number):
    """The patterns of exercise number's answer that text holds."""
    return [p for p in ANSWERS.get(number, []) if re.search(p, flat(text))]


def outputs(cell):
    """The text of a code cell's outputs: streams, results, errors."""
    text = []
    for output in cell.get("outputs", []):
        for part in (output.get("text", ""), output.get("data", {}).get("text/plain", ""),
                     output.get("traceback", [])):
            text.append("".join(part) if isinstance(part, list) else part)
    return "\n".join(text)


def cells_before_checks(folder=EDITION, read=lambda cell: "".join(cell["source"])):
    """{number: [(where, text)]}: every cell a student reads before that exercise's check,
    in course order (earlier notebooks whole, then its own notebook up to the check); text:
    read(cell), its source by default."""
    numbers = {e.grade_id: e.number for e in exercises()}  # the checks' grade_ids
    seen, before = [], {}
    for path in notebooks(folder):
        for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
            source = read(cell)
            number = numbers.get(cell["metadata"].get("nbgrader", {}).get("grade_id"))
            if number:
                before[number] = list(seen)
            seen.append((f"{path.name} cell {i}", source))
    return before


def leaks(folder=EDITION, stubs=STUBS):
    """(exercise, where, pattern) of every answer shown too early."""
    found = []
    for number, cells in cells_before_checks(folder).items():
        for where, source in cells:
            found += [(number, where, p) for p in found_in(source, number)]
    for path in [stubs / f.removeprefix("normlib/") for f in student_files()]:
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8")
        for number in ANSWERS:
            found += [(number, path.name, p) for p in found_in(text, number)]
    return found


def test_every_exercise_is_either_derived_or_a_definition():
    numbers = {e.number for e in exercises()}
    assert set(ANSWERS) | set(DEFINITIONS) == numbers
    assert not set(ANSWERS) & set(DEFINITIONS)
    assert len(ANSWERS) >= 10 and all(ANSWERS.values())


def test_the_student_edition_shows_no_answer_before_its_check():
    assert leaks() == []


def test_the_stored_outputs_show_no_answer_before_its_check():
    """The solutions' stored outputs (what the reference's Run All printed), cell by cell
    before each check."""
    found = [(number, where, p)
             for number, cells in cells_before_checks(SOLUTIONS, read=outputs).items()
             for where, text in cells for p in found_in(text, number)]
    assert found == []


def unopened(cell):
    """What a student reads of a cell without opening anything: a markdown cell without its
    collapsed <details> blocks, a code cell's source unless collapsed (source_hidden), an
    answer cell of the student edition nothing (its model answer is not released)."""
    if cell["metadata"].get("nbgrader", {}).get("solution") and cell["cell_type"] == "markdown":
        return ""
    if cell["metadata"].get("jupyter", {}).get("source_hidden"):
        return ""
    return re.sub(r"<details>.*?</details>", "", "".join(cell["source"]), flags=re.S)


def shown_after_checks(folder=SOLUTIONS):
    """(exercise, where, pattern) of each answer that its own notebook shows after its
    check, in the rest of the check's section (up to the next "## " heading: what a student
    scrolls to from the check), outside a collapsed block. Later sections may use it."""
    numbers = {e.grade_id: e.number for e in exercises()}
    found = []
    for path in notebooks(folder):
        after = []  # the exercises whose check is above
        for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
            number = numbers.get(cell["metadata"].get("nbgrader", {}).get("grade_id"))
            if number:
                after.append(number)
                continue
            if cell["cell_type"] == "markdown" and "".join(cell["source"]).startswith("## "):
                after = []  # a new section
            found += [(n, f"{path.name} cell {i}", p) for n in after
                      for p in found_in(unopened(cell), n)]
    return found


def test_after_its_check_an_answer_waits_in_a_collapsed_block():
    assert shown_after_checks() == []


def test_an_answer_shown_after_its_check_outside_a_block_is_found(tmp_path):
    folder = tmp_path / "solutions"
    folder.mkdir()
    for source in notebooks():
        nb = json.loads(source.read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            text = "".join(cell["source"])
            if "<summary>Show the derivation</summary>" in text and "Chan, Golub" in text:
                cell["source"] = text.replace("<details><summary>Show the derivation</summary>",
                                              "")
            if "J_formula" in text:
                cell["metadata"]["jupyter"] = {}
        (folder / source.name).write_text(json.dumps(nb))
    found = {n for n, _, _ in shown_after_checks(folder)}
    assert found == {"2.3", "6.2"}, found


@pytest.fixture(scope="module")
def stub_run(tmp_path_factory):
    """The student edition's notebooks after a Run All on its stubs (every exercise still
    raises NotImplementedError), as a student sees them on a fresh clone, but for the long
    experiments (cells tagged skip-at-grading, as grading skips them): their outputs are
    the reference's stored ones, which the test above scans (they print what torch's layers
    compute, or say which exercises they wait for), and each costs seconds. One kernel
    runs the notebooks in turn (each starts by importing what it uses), as a kernel
    start costs two seconds."""
    out = tmp_path_factory.mktemp("run_all")
    ran = []
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(cwd=str(EDITION))
    try:
        for path in notebooks(EDITION):
            notebook = nbformat.read(path, as_version=4)
            notebook.cells = [c for c in notebook.cells
                              if "skip-at-grading" not in c.metadata.get("tags", [])]
            NotebookClient(notebook, km=manager, allow_errors=True, timeout=300).execute(
                reset_kc=False)
            nbformat.write(notebook, out / path.name)
            ran.append(notebook)
    finally:
        manager.shutdown_kernel(now=True)
    return out, ran


def test_a_run_all_on_the_stubs_prints_no_answer(stub_run):
    """No check passes, so no output may hold any exercise's answer."""
    folder, ran = stub_run
    found = [(n, f"{path.name} cell {i}", p)
             for path, notebook in zip(notebooks(folder), ran)
             for i, cell in enumerate(notebook.cells) for n in ANSWERS
             for p in found_in(outputs(cell), n)]
    assert found == []
    assert len(ran) == len(list(notebooks(EDITION)))


def test_a_run_all_on_the_stubs_prints_no_traceback(stub_run):
    """Every error a student's first Run All meets (a stub, a check waiting for it) is the
    one short message of the notebook extension, never a traceback (tests/test_run_all.py:
    the reference's Run All stores no error at all)."""
    _, ran = stub_run
    errors, long = 0, []
    for path, notebook in zip(notebooks(EDITION), ran):
        for i, cell in enumerate(notebook.cells):
            for output in cell.get("outputs", []):
                text = "".join(output.get("traceback", [])) + "".join(output.get("text", ""))
                errors += output.output_type == "error"
                if "Traceback" in text or 'File "' in text or (
                        output.output_type == "error" and len(text.splitlines()) > 10):
                    long.append(f"{path.name} cell {i}: {text[:300]}")
    assert errors > len(exercises()) and long == [], "\n".join(long)


def test_the_run_that_shows_a_prediction_waits_for_its_check(stub_run):
    """2.4's run prints that it waits; the reference's stored output is the run itself."""
    _, ran = stub_run
    unit2 = ran[1]
    waiting = [outputs(c) for c in unit2.cells if 'if revealed("2.4")' in "".join(c.source)]
    assert len(waiting) == 1 and waiting[0].startswith(
        "This cell shows what Exercise 2.4 asks you to find, so it waits"), waiting
    stored = [outputs(c) for c in json.loads(next(p for p in notebooks() if p.name.startswith(
        "02")).read_text())["cells"] if 'if revealed("2.4")' in "".join(c["source"])]
    assert found_in(stored[0], "2.4"), stored  # (the pattern sees the output it guards)


def test_each_answer_is_shown_after_its_check_in_the_solutions():
    """The patterns are live: most derived answers are revealed in the notebook right after
    their check (or computed there, in the reference's code), so a pattern that matches
    nothing anywhere would be a check that cannot fail."""
    texts = [flat("".join(c["source"])) for path in notebooks()
             for c in json.loads(path.read_text(encoding="utf-8"))["cells"]]
    texts += [flat(p.read_text()) for p in sorted((REPO / "solutions" / "normlib").glob("*.py"))]
    for number, patterns in ANSWERS.items():
        assert any(re.search(p, t) for p in patterns for t in texts), number


def plant(tmp_path, notebook, before_grade_id, source):
    """A copy of the student edition's notebooks with a markdown cell of source planted
    just before the check cell before_grade_id of notebook."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for path in notebooks(EDITION):
        nb = json.loads(path.read_text(encoding="utf-8"))
        if path.name == notebook:
            i = next(i for i, c in enumerate(nb["cells"])
                     if c["metadata"].get("nbgrader", {}).get("grade_id") == before_grade_id)
            nb["cells"].insert(i, {"cell_type": "markdown", "metadata": {}, "source": source})
        (folder / path.name).write_text(json.dumps(nb))
    return folder


# what this course showed before issue 14, each before its exercise's check
OLD = [
    ("01_layernorm_forward.ipynb", "ex1_1_layer_norm_stats", "1.1",
     "    axes = tuple(range(x_int.ndim - len(normalized_shape), x_int.ndim))"),
    ("02_layernorm_backward.ipynb", "ex2_2_layer_norm_backward", "2.2",
     "dx_compact = rstd * (g - g_mean - x_hat * gx_mean)  # (B, N)"),
    ("02_layernorm_backward.ipynb", "ex2_2_layer_norm_backward", "2.2",
     r"\mathrm{rstd}\,\Big(g \;-\; \overline{g} \;-\; \hat{x}\;\overline{g\,\hat{x}}\Big)"),
    ("02_layernorm_backward.ipynb", "ex2_1_layer_norm_backward_staged", "2.1",
     "| $x_c = x - \\mu$ | difference | $dx \\mathrel{+}= dx_c$, $\\;d\\mu = -\\sum dx_c$ |"),
    ("02_layernorm_backward.ipynb", "ex2_3_layer_norm_jacobian", "2.3",
     r"J \;=\; \mathrm{rstd}\,\Big(I - \tfrac{1}{N}\mathbf{1}\mathbf{1}^\top - "
     r"\tfrac{1}{N}\hat{x}\hat{x}^\top\Big)"),
    ("02_layernorm_backward.ipynb", "ex2_4_predicted_sum_gradients", "2.4",
     "and so is that of a detached variance; a detached mean gives $\\mathrm{rstd}$."),
    ("03_normalization_family.ipynb", "ex3_7_rms_norm_backward", "3.7",
     "dx = rrms * (g - x_hat * (g * x_hat).mean(axis=-1, keepdims=True))  # (4, 6)"),
    ("03_normalization_family.ipynb", "ex3_8_batch_norm_backward", "3.8",
     "two mean terms vanish and $dx = \\mathrm{rstd} \\cdot g$ with the running `rstd`:"),
    ("05_add_and_norm.ipynb", "ex5_4_final_norm_gain", "5.4",
     "sees a stream of unit scale at every depth. Your gain is $\\mathrm{rstd}$, the same."),
    ("06_numerics_and_precision.ipynb", "ex6_2_welford_merge", "6.2",
     r"M_2 = M_{2,a} + M_{2,b} + \delta^2\,\frac{n_a n_b}{n}."),
]


@pytest.mark.parametrize("notebook,grade_id,number,source", OLD,
                         ids=[f"{n}-{i}" for i, (_, _, n, _) in enumerate(OLD)])
def test_an_answer_planted_before_its_check_is_found(tmp_path, notebook, grade_id, number,
                                                     source):
    found = leaks(plant(tmp_path, notebook, grade_id, source))
    assert [(n, p) for n, _, p in found if n == number], found


def test_an_answer_in_a_stub_docstring_is_found(tmp_path):
    stubs = tmp_path / "normlib"
    stubs.mkdir()
    (stubs / "rms_norm.py").write_text(
        '"""Exercise 3.7: RMSNorm backward.\n\n    dx = rrms * (g - x_hat * mean(g * x_hat))"""\n')
    (stubs / "norm.py").write_text(
        "    dx: x's shape, dL/dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)), the means\n")
    (stubs / "variance.py").write_text("        m2    = m2_a + m2_b + delta^2 * count_a * "
                                       "count_b / count\n")
    found = {n for n, _, _ in leaks(EDITION, stubs)}
    assert found == {"2.2", "3.2", "3.7", "6.2"}


# the derivations that are not exercises (STEPS) -------------------------------------------


def step_cells(folder, step, read=lambda cell: "".join(cell["source"])):
    """(before, after) of a STEPS derivation in folder's notebooks: [(where, text)] of every
    cell a student reads before its check cell (earlier notebooks whole, then its own up to
    the check), and of the cells after it in the rest of its section (up to the next "## "
    heading); text: read(cell)."""
    notebook, check_id, _ = STEPS[step]
    before, after = [], []
    for path in notebooks(folder):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        if path.name != notebook:
            before += [(f"{path.name} cell {i}", read(c)) for i, c in enumerate(cells)]
            if path.name > notebook:
                break
            continue
        k = next(i for i, c in enumerate(cells) if c.get("id") == check_id)
        before += [(f"{path.name} cell {i}", read(c)) for i, c in enumerate(cells[:k])]
        for i, c in enumerate(cells[k + 1:], k + 1):
            if c["cell_type"] == "markdown" and "".join(c["source"]).startswith("## "):
                break
            after.append((f"{path.name} cell {i}", read(c)))
        break
    return before, after


def step_found(text, step):
    return [p for p in STEPS[step][2] if re.search(p, flat(text))]


def step_leaks(folder=EDITION):
    """(step, where, pattern) of every STEPS answer shown too early: in the student
    edition before its check (sources, hints included, and the solutions' stored outputs
    there), in normkit/'s files, or after its check outside a collapsed block."""
    found = []
    for step in STEPS:
        before, _ = step_cells(folder, step)
        stored, _ = step_cells(SOLUTIONS, step, read=outputs)
        _, after = step_cells(SOLUTIONS, step, read=unopened)
        for where, text in before + stored + after:
            found += [(step, where, p) for p in step_found(text, step)]
        for path in sorted((REPO / "normkit").rglob("*.py")):
            found += [(step, path.name, p) for p in step_found(path.read_text(), step)]
    return found


def test_a_derivation_shows_no_answer_before_its_check():
    assert step_leaks() == []


def test_each_derivation_is_answered_after_its_check_in_the_solutions():
    """The patterns are live: each matches the model derivation (its collapsed block) or
    the solutions' "your turn" cell, and the check cell exists in both editions."""
    for step, (notebook, check_id, patterns) in STEPS.items():
        for folder in (SOLUTIONS, EDITION):
            cells = json.loads((folder / notebook).read_text(encoding="utf-8"))["cells"]
            assert [c.get("id") for c in cells].count(check_id) == 1, (folder, step)
        texts = [flat("".join(c["source"])) for c in json.loads(
            (SOLUTIONS / notebook).read_text(encoding="utf-8"))["cells"]]
        assert all(any(re.search(p, t) for t in texts) for p in patterns[:1] + patterns[4:6]), \
            step


@pytest.mark.parametrize("source", [
    "$$\\lVert W\\rVert^4 = \\frac{\\text{lr}\\, c^2}{2\\lambda}$$",
    "the rate is then $\\frac{\\sqrt{2\\,\\text{lr}\\,\\lambda}}{c}$",
    "    norm = (lr * c**2 / (2 * weight_decay)) ** 0.25",
])
def test_a_derivation_planted_before_its_check_is_found(tmp_path, source):
    step = next(iter(STEPS))
    notebook, check_id, _ = STEPS[step]
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for path in notebooks(EDITION):
        nb = json.loads(path.read_text(encoding="utf-8"))
        if path.name == notebook:
            k = next(i for i, c in enumerate(nb["cells"]) if c.get("id") == check_id)
            nb["cells"].insert(k, {"cell_type": "markdown", "metadata": {}, "source": source})
        (folder / path.name).write_text(json.dumps(nb))
    before, _ = step_cells(folder, step)
    assert [w for w, text in before if step_found(text, step)], source
