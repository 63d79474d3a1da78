"""`make check`, the student's command, on a copy of the student edition: the untouched
stubs are all "not yet implemented" (no traceback, exit 0), --hidden runs the hidden tests,
a broken file and a wrong kernel fail with their messages, and --all counts what is not
yet implemented as failing."""

import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tools.course.exercises import exercises

EXERCISES = [e.number for e in exercises()]


@pytest.fixture
def edition(tmp_path):
    for folder in ("normkit", "normlib", "solutions", "tools"):
        shutil.copytree(REPO / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def check(folder, *args):
    result = subprocess.run([sys.executable, "-m", "tools.student.check", *args], cwd=folder,
                            capture_output=True, text=True)
    return result.returncode, result.stdout + result.stderr


def use_reference(folder):
    for path in (REPO / "solutions" / "normlib").glob("*.py"):
        shutil.copy(path, folder / "normlib" / path.name)


def test_untouched_edition_is_not_yet_implemented(edition):
    """Work not yet done is not an error: exit 0 and a summary saying so (make would print
    "Error 1" otherwise), unless --all asks for every exercise to pass."""
    code, out = check(edition)
    assert code == 0, out
    assert out.rstrip().endswith("then run make check (python -m tools.student.check) again."), out
    for number in EXERCISES:
        assert any(line.startswith(f"Exercise {number}") and re.search(
            r"not yet implemented( \(needs Exercise \d\.\d\))?$", line)
            for line in out.splitlines()), out
    assert EXERCISES[:7] == ["1.1", "1.2", "2.1", "2.2", "2.3", "2.4", "2.5"]
    n = len(EXERCISES)
    assert "Traceback" not in out and f"0 passed, 0 failed, {n} not yet implemented" in out


EDGE_MERGE = '''

def welford_merge(a, b):  # right but for an empty part (1 / 0): what only the hidden tests catch
    (na, ma, m2a), (nb, mb, m2b) = a, b
    delta = mb - ma
    return na + nb, ma + delta * nb / (na + nb), m2a + m2b + delta * delta / (1 / na + 1 / nb)
'''


def reference_with_edge_merge(folder):
    use_reference(folder)
    path = folder / "normlib" / "variance.py"
    path.write_text(path.read_text() + EDGE_MERGE)


def test_hidden_runs_the_hidden_tests_and_a_broken_file_costs_only_its_exercises(edition):
    """The reference, but for a merge that only the hidden tests catch and an
    instance_norm.py that does not compile: --hidden fails those two exercises alone among
    Units 3 and 6 (tests/test_isolation.py runs every file's case the way this command
    runs its checks; tests/test_graders.py passes the reference through every check with
    its hidden tests). The visible checks pass the merge: the next test."""
    reference_with_edge_merge(edition)
    path = edition / "normlib" / "instance_norm.py"
    path.write_text(path.read_text() + "\ndef (:\n")
    chosen = [n for n in EXERCISES if n[0] in "36"]
    code, out = check(edition, "--hidden", "--all", *chosen)
    assert code == 1, out
    failed = [line.split()[1] for line in out.splitlines()
              if line.startswith("Exercise") and line.split()[-1] == "FAIL"]
    assert failed == ["3.5", "6.2"], out
    assert "SyntaxError" in out and "(your normlib/instance_norm.py:" in out, out
    assert f"{len(chosen) - 2} passed, 2 failed, 0 not yet implemented (with the hidden " \
        "tests)" in out


def test_chosen_exercises_a_wrong_kernel_and_one_waiting_on_another(edition):
    reference_with_edge_merge(edition)
    path = edition / "normlib" / "layer_norm.py"
    path.write_text(path.read_text().replace("(xc * xc).mean(", "(xc * xc).sum("))
    shutil.copy(REPO / "normlib" / "norm.py", edition / "normlib" / "norm.py")  # 3.1, 3.2 stubs
    code, out = check(edition, "1.1", "1.2", "3.3", "6.2")
    assert code == 1
    assert "Exercise 1.1  layer_norm_stats" in out and "FAIL" in out
    assert "rstd for x (2, 3, 4) float32" in out  # which case, from the check's message
    # the worst element, expected vs got, and the signature: a sum for a mean is off by N
    assert re.search(r"Worst at index \(\d, \d, \d\): expected [\d.]+, got [\d.]+", out), out
    assert "Likely cause: every value is 0.5 times the exact one" in out, out
    # where: the student's function (the wrong value is returned, the check raises), and
    # the check's line that failed, not normkit/testing.py's
    assert re.search(r"\(your layer_norm_stats is at normlib/layer_norm\.py:\d+; the case is "
                     r"normkit/checks/unit1\.py:\d+: check_stats\(X, \(4,\)\)", out), out
    assert "normkit/testing.py" not in out and "Traceback" not in out
    assert ("Your layer_norm_forward calls layer_norm_stats (Exercise 1.1), which fails its "
            "check too: fix that first") in out  # 1.2 calls 1.1
    assert "Fix the failures first" in out
    assert "not yet implemented (needs Exercise 3.1)" in out, out
    assert re.search(r"^Exercise 6\.2  welford_merge +pass$", out, re.M), out  # visible only
    assert "Exercise 2.1" not in out  # only the chosen exercises ran
    assert "1 passed, 2 failed, 1 not yet implemented" in out


def test_only_a_stub_is_not_yet_implemented():
    """Another NotImplementedError is a mistake: a LayerNormFunction without its backward
    (torch raises it), a module whose forward is misnamed."""
    from tools.student.check import run

    stub = 'raise NotImplementedError("Exercise 2.5: implement LayerNormFunction.forward")'
    assert run(stub, "<2.5>") == ("todo", "Exercise 2.5: implement LayerNormFunction.forward")
    status, detail = run("import torch\ntorch.nn.Module()(1)", "<4.2>")
    assert status == "FAIL" and detail.startswith("NotImplementedError: Module [Module] is "
                                                  "missing the required \"forward\" function")


@pytest.mark.parametrize("results, code, code_all", [
    (["pass", "pass"], 0, 0),
    (["pass", "todo"], 0, 1),  # not yet done: not an error, unless --all
    (["pass", "FAIL"], 1, 1),
])
def test_the_exit_status(monkeypatch, capsys, results, code, code_all):
    import tools.student.check

    for all_ in (False, True):
        outcomes = iter(results)
        monkeypatch.setattr(tools.student.check, "run",
                            lambda source, filename, exercise=None, o=outcomes: (next(o), ""))
        assert tools.student.check.main(["1.1", "1.2"] + ["--all"] * all_) == (code_all if all_ else code)


def test_a_failure_in_the_students_code_names_their_file_and_line(edition):
    """An error raised in the student's own file points at that line; each exercise is one
    line of output (the check cell's own "the visible checks pass" is not repeated), in a
    column as wide as the longest name."""
    use_reference(edition)
    path = edition / "normlib" / "layer_norm.py"
    lines = path.read_text().splitlines()
    row = next(i for i, line in enumerate(lines) if "def layer_norm_stats" in line) + 1
    lines.insert(row, "    raise ValueError('my bug')")
    path.write_text("\n".join(lines) + "\n")
    code, out = check(edition, "1.1", "2.5", "5.2")
    assert code == 1
    assert (f"CheckFailed: your code raised ValueError: my bug\n      at normlib/layer_norm.py, "
            f"line {row + 1}: raise ValueError('my bug')\n") in out, out
    assert "(your normlib" not in out  # (the message says where: not twice)
    assert "visible checks pass" not in out
    names = [line for line in out.splitlines() if line.startswith("Exercise")]
    assert len(names) == 3 and len({len(line) - len(line.split()[-1]) for line in names}) == 1


def test_an_older_checkout_is_told_which_files_to_delete(edition):
    """normlib/ files of the course's code from before normkit/ (an older checkout's, kept
    by git where the student edited them) are named, with the advice to delete them; the
    checks run as usual."""
    (edition / "normlib" / "testing.py").write_text("# the old checks\n")
    (edition / "normlib" / "channels.py").write_text("")
    code, out = check(edition, "1.1")
    assert code == 0
    assert out.startswith("Delete normlib/channels.py, normlib/testing.py: the course's code "
                          "moved from normlib/ to normkit/"), out
    assert "Exercise 1.1  layer_norm_stats  not yet implemented" in out
    (edition / "normlib" / "testing.py").unlink()
    (edition / "normlib" / "channels.py").unlink()
    assert "Delete" not in check(edition, "1.1")[1]
    # an older normlib/ copied in place of this one: the provided modules it lacks
    from tools.student.check import PROVIDED
    assert PROVIDED == tuple(sorted(p.name for p in (REPO / "normlib").glob("_[!_]*.py")))
    for name in PROVIDED[1:]:
        (edition / "normlib" / name).rename(edition / name)
    code, out = check(edition, "1.1")
    assert out.startswith("Restore normlib/_channels.py, normlib/_validation.py (git checkout "
                          "-- normlib/_channels.py normlib/_validation.py): the course "
                          "provides them"), out
    for name in PROVIDED[1:]:
        (edition / name).rename(edition / "normlib" / name)
    assert "Restore" not in check(edition, "1.1")[1]
    # an exercise file of the old stubs imports the provided helpers from normlib/
    path = edition / "normlib" / "batch_norm.py"
    path.write_text(path.read_text().replace("from normlib._channels import",
                                             "from .channels import"))
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1)
                if "from .channels import" in text)
    code, out = check(edition, "1.1")
    assert f"In normlib/batch_norm.py, line {line}, write `from normlib._channels import " \
           "channel_affine, per_channel, update_running` for `from .channels import " \
           "channel_affine, per_channel, update_running`: it imports what moved" in out, out


def test_make_check_works_from_notebooks():
    """JupyterLab's terminal opens in notebooks/, the folder it shows: notebooks/Makefile
    (the student edition's) is the course's Makefile, one folder up."""
    result = subprocess.run(["make", "check", "EX=1.1"], cwd=REPO / "notebooks",
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Exercise 1.1  layer_norm_stats  " in result.stdout, result.stdout
    assert "No rule to make target" not in result.stdout + result.stderr
