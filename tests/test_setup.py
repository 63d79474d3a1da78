"""The set-up promises: conda gets pyproject's pins, CI runs `make test`, the README
opens with the two commands, and the stub generator writes what the students see."""

import re
import tomllib

import pytest

from tests.conftest import REPO
from tools.course.markers import block_lines, fold_hidden, has_marker, split_check, strip_solutions


def test_environment_yml_has_pyprojects_pins_and_installs_the_project():
    pins = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    env = (REPO / "environment.yml").read_text()
    listed = re.findall(r"^\s+- ([\w-]+==[\w.]+)$", env, flags=re.M)
    assert sorted(listed) == sorted(pins)
    assert "torch==2.13.0" in pins
    assert re.search(r"^\s+- -e \.$", env, flags=re.M)


# imported where it exists, never installed by the course: Triton comes with torch's CUDA
# wheels (normkit/triton_layer_norm.py, Unit 7 on a GPU); this machine's CPU wheel has none
OPTIONAL = {"triton"}
OWN = {"tools", "normkit", "normlib", "tests", "nbgrader_config"}


def third_party_imports():
    """{top-level module: [files]} of every absolute import of a module outside the standard
    library and the course's own packages, in the course's code, its tests, the reference
    and the solution notebooks' code cells (their magics left out)."""
    import ast
    import json
    import sys

    sources = [(p, p.read_text()) for folder in ("tools", "normkit", "normlib", "solutions",
                                                 "tests") for p in sorted((REPO / folder).rglob("*.py"))]
    sources.append((REPO / "nbgrader_config.py", (REPO / "nbgrader_config.py").read_text()))
    for path in sorted((REPO / "solutions").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code":
                lines = "".join(cell["source"]).splitlines()
                sources.append((path, "\n".join(line for line in lines
                                                 if not line.lstrip().startswith(("%", "!")))))
    found = {}
    for path, text in sources:
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for top in {name.split(".")[0] for name in names} - OWN - sys.stdlib_module_names:
                found.setdefault(top, []).append(str(path.relative_to(REPO)))
    return found


def test_every_package_the_course_imports_is_pinned():
    """pyproject.toml says every pin is exact: so is every package imported directly, not
    only those that brought it (nbgrader brings SQLAlchemy, but tools/instructor/gradebook.py imports
    it, and an upgrade of nbgrader's own pins would change it unseen)."""
    import importlib.metadata

    def key(name):
        return re.sub(r"[-_.]+", "-", name).lower()

    pins = {key(pin.split("==")[0]) for pin in tomllib.loads(
        (REPO / "pyproject.toml").read_text())["project"]["dependencies"]}
    assert all("==" in pin for pin in tomllib.loads(
        (REPO / "pyproject.toml").read_text())["project"]["dependencies"])
    distributions = importlib.metadata.packages_distributions()
    found = third_party_imports()
    assert {"torch", "numpy", "nbgrader", "sqlalchemy", "traitlets"} <= set(found)
    unpinned = {top: files[:2] for top, files in found.items() if top not in OPTIONAL and
                not any(key(d) in pins for d in distributions.get(top, []))}
    assert unpinned == {}, "imported, not pinned in pyproject.toml (nor environment.yml)"
    assert OPTIONAL <= set(found) and not OPTIONAL & set(distributions)


def test_the_environment_has_no_slow_iri_checker():
    """make's install step removes rfc3987-syntax (Makefile: 2.5 s of CPU in every process
    that imports nbformat); jsonschema then passes over the "iri" format, which no Jupyter
    or nbgrader schema uses."""
    import importlib.util

    import jsonschema

    assert importlib.util.find_spec("rfc3987_syntax") is None
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    assert "iri" not in checker.checkers and "uri" in checker.checkers


def test_the_tests_run_torch_on_one_thread_per_process():
    """tests/conftest.py: two xdist workers on two cores, each with its kernels."""
    import torch

    assert torch.get_num_threads() == 1


def test_ci_runs_make_test_and_nothing_else():
    """.ci/run is the README's command (with the browser test required): CI tests the
    path a developer takes, system packages included (tools/maintainer/system_packages.py)."""
    lines = [line for line in (REPO / ".ci" / "run").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines == ["set -euo pipefail", 'cd "$(dirname "$0")/.."',
                     "COURSE_REQUIRE_BROWSER=1 make test"]
    assert "- run: make test\n" in (REPO / ".github" / "workflows" / "test.yml").read_text()


def test_readme_opens_with_the_two_commands():
    readme = (REPO / "README.md").read_text()
    first_block = re.search(r"```(?:sh|bash)?\n(.*?)```", readme, flags=re.S).group(1)
    assert first_block.split() == ["make", "lab", "make", "test"] or (
        "make lab" in first_block and "make test" in first_block)


SOURCE = '''
def f(x):
    """Exercise 3.4: f."""
    y = 1
    ### BEGIN SOLUTION
    return x + y
    ### END SOLUTION


class F:
    """Exercise 3.5: F."""

    def g(self):
        ### BEGIN SOLUTION
        return 2
        ### END SOLUTION
'''


def test_strip_replaces_each_solution_block_by_a_tagged_stub():
    out = strip_solutions(SOURCE)
    assert '    raise NotImplementedError("Exercise 3.4: implement f")\n' in out
    assert '        raise NotImplementedError("Exercise 3.5: implement F.g")\n' in out
    assert "return x + y" not in out and "return 2" not in out and "SOLUTION" not in out
    assert '"""Exercise 3.4: f."""' in out and "y = 1" in out  # the rest is kept


@pytest.mark.parametrize(
    "broken",
    [SOURCE.replace("    ### END SOLUTION\n\n\nclass", "\n\nclass", 1),  # unclosed
     SOURCE.replace("### BEGIN SOLUTION\n    return x", "return x", 1),  # END without BEGIN
     SOURCE.replace('"""Exercise 3.4: f."""', '"""f."""')],  # no exercise number
)
def test_strip_rejects_malformed_markers(broken):
    with pytest.raises(ValueError):
        strip_solutions(broken)


def test_a_check_cell_splits_into_its_visible_and_hidden_parts():
    source = "a = 1\n### BEGIN HIDDEN TESTS\nb = 2\nc = 3\n### END HIDDEN TESTS\nprint(a)\n"
    assert split_check(source) == ("a = 1\nprint(a)\n", "b = 2\nc = 3\n")
    assert split_check("a = 1\n") == ("a = 1\n", "")
    assert fold_hidden(source) == "a = 1\n# ... 2 lines of hidden tests, not shown ...\nprint(a)"
    assert [line for line, inside in block_lines(source) if inside] == ["b = 2", "c = 3"]
    assert has_marker("    ### END SOLUTION") and not has_marker("# BEGIN, END")
