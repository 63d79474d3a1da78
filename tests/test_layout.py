"""The layout's promises, read from the code: tools/ is one folder per process or trust
zone, each importing only the zones below it (ZONES, as tools/__init__.py draws them), and
no import circle among the course's own modules, counting the imports inside functions (an
import deferred to run time still ties the two modules: each needs the other to work, and
the order of their first imports decides what runs)."""

import ast
import graphlib
from pathlib import Path

from tests.conftest import REPO

PACKAGES = ("tools", "normkit")
CONFIG = "nbgrader_config"  # the repository's nbgrader settings: every nbgrader command
# loads them, a grading worker's Autograde too, so they are read as the worker's code
# {zone: the zones it may import}: tools/__init__.py's drawing
ZONES = {
    "sandboxed": set(),
    "lms": set(),
    "course": {"lms", "sandboxed"},
    "sandbox": {"course", "sandboxed"},
    "judge": {"course", "sandbox", "sandboxed"},
    "worker": {"course", "judge", "sandbox", "sandboxed"},
    "instructor": {"course", "lms", "worker"},
    "student": {"course"},
    "maintainer": {"course", "instructor", "sandbox"},
}


def module_name(path):
    """tools/sandboxed/peer.py -> "tools.sandboxed.peer"; a package's __init__.py -> its name."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path, module, known):
    """The modules of `known` that the file at path (module) imports, at any depth of its
    code: the longest known prefix of each name it imports (`from tools.sandbox import
    cgroup` names tools.sandbox.cgroup), relative imports resolved."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + [base] if base else parts)
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            prefixes = (".".join(parts[:k]) for k in range(len(parts), 0, -1))
            match = next((p for p in prefixes if p in known), None)
            if match is not None and match != module:
                found.add(match)
    return found


def import_graph(packages=PACKAGES):
    """{module: the course's modules it imports} over the packages' .py files."""
    paths = {module_name(p): p for package in packages
             for p in sorted((REPO / package).rglob("*.py"))}
    paths[CONFIG] = REPO / f"{CONFIG}.py"
    return {module: imported(path, module, paths) for module, path in paths.items()}


def circle(graph):
    """One import circle of graph, as a list of modules (first == last), or None."""
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as error:
        return error.args[1]
    return None


def test_no_module_of_the_course_imports_itself_through_others():
    graph = import_graph()
    assert {"tools.sandboxed.peer", "tools.sandboxed.torch_proxies", "normkit.modern"} <= set(graph)
    assert "tools.sandboxed.remote" in graph["tools.sandboxed.torch_proxies"]
    assert circle(graph) is None, " -> ".join(circle(graph))


def test_a_circle_through_a_deferred_import_is_found(tmp_path):
    """The reading on a package of three modules whose circle closes inside a function (as
    tools.sandboxed.peer and torch_proxies did), with a relative import on the way."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from . import b\n")
    (package / "b.py").write_text("import os\nfrom pkg.c import thing\n")
    (package / "c.py").write_text("def thing():\n    from pkg.a import x\n    return x\n")
    paths = {"pkg" if p.stem == "__init__" else f"pkg.{p.stem}": p for p in package.glob("*.py")}
    graph = {m: imported(p, m, paths) for m, p in paths.items()}
    # (importing from a package runs its __init__: pkg.a imports pkg too)
    assert graph == {"pkg": set(), "pkg.a": {"pkg", "pkg.b"}, "pkg.b": {"pkg.c"},
                     "pkg.c": {"pkg.a"}}
    assert circle(graph) is not None and set(circle(graph)) == {"pkg.a", "pkg.b", "pkg.c"}
    (package / "c.py").write_text("def thing():\n    return 1\n")
    graph = {m: imported(p, m, paths) for m, p in paths.items()}
    assert circle(graph) is None


def test_what_runs_in_the_sandbox_imports_nothing_else_of_tools():
    """tools/sandboxed/ is all a sandbox mounts of tools/ (tools.sandbox.bubblewrap.INSIDE): its
    modules import one another and nothing else of tools/ (the package's __init__ is a
    docstring), nor of normkit/."""
    from tools.sandbox.bubblewrap import INSIDE

    graph = import_graph()
    inside = {m for m in graph if m.startswith("tools.sandboxed")}
    assert {"tools.sandboxed.runner", "tools.sandboxed.guard", "tools.sandboxed.limits"} <= inside
    outside = {m: sorted(graph[m] - inside - {"tools"}) for m in inside}
    assert {m: found for m, found in outside.items() if found} == {}
    assert graph["tools"] == set()  # (tools/__init__.py: mounted too, it imports nothing)
    assert INSIDE == ("tools/__init__.py", "tools/sandboxed")


def zone(module):
    """tools.worker.task -> "worker" (and nbgrader_config: CONFIG); tools itself and
    normkit's modules: None."""
    if module == CONFIG:
        return "worker"
    parts = module.split(".")
    return parts[1] if parts[0] == "tools" and len(parts) > 1 else None


def trespasses(graph, zones=ZONES):
    """["a -> b", ...]: each import of graph from one zone into another that zones does not
    allow, and each module of tools/ outside every zone (tools/__init__.py aside)."""
    found = [f"{m}: in no zone" for m in graph
             if m.startswith("tools") and m != "tools" and zone(m) not in zones]
    for module, imports in graph.items():
        for other in imports:
            if zone(module) in zones and zone(other) not in (None, zone(module)) and \
                    zone(other) not in zones[zone(module)]:
                found.append(f"{module} -> {other}")
    return sorted(found)


def test_each_zone_imports_only_the_zones_below_it():
    graph = import_graph()
    assert {zone(m) for m in graph} - {None} == set(ZONES)  # every zone has code
    assert trespasses(graph) == []
    assert all(not (graph[m] & {o for o in graph if o.startswith("tools")})
               for m in graph if m.startswith("normkit")), "normkit/ imports tools/"
    # the rules form no circle of zones
    assert circle({z: allowed for z, allowed in ZONES.items()}) is None


def test_a_trespass_is_found():
    """The rule on imports a session's refactoring once broke: the grading task reaching
    up into the head's gradebook, a step reaching down to a maintainer's tool, a module
    left at the top of tools/."""
    graph = {"tools.worker.task": {"tools.instructor.gradebook", "tools.course.folder"},
             "tools.instructor.release": {"tools.maintainer.edition"},
             "tools.course.folder": set(), "tools.instructor.gradebook": set(),
             "tools.maintainer.edition": set(), "tools.grading": set(), "tools": set(),
             CONFIG: {"tools.instructor.feedback", "tools.worker.judged"},
             "tools.instructor.feedback": set(), "tools.worker.judged": set()}
    assert trespasses(graph) == ["nbgrader_config -> tools.instructor.feedback",
                                 "tools.grading: in no zone",
                                 "tools.instructor.release -> tools.maintainer.edition",
                                 "tools.worker.task -> tools.instructor.gradebook"]


def test_a_worker_loading_the_nbgrader_config_imports_none_of_the_heads_code():
    """The config names the head's feedback classes as strings (issue 61): loaded as a
    worker's Autograde loads it, it imports tools.worker's modules and none of
    tools.instructor's; each class it names imports, as nbgrader's feedback step imports it."""
    import json
    import subprocess
    import sys

    load = ("import json, sys\n"
            "from traitlets.config.loader import PyFileConfigLoader\n"
            f"c = PyFileConfigLoader('{CONFIG}.py', path={str(REPO)!r}).load_config()\n"
            "named = [p for p in c.GenerateFeedback.preprocessors if isinstance(p, str)]\n"
            "print(json.dumps([sorted(m for m in sys.modules if m.startswith('tools.')),\n"
            "                  [*named, c.GenerateFeedback.exporter_class]]))\n")
    done = subprocess.run([sys.executable, "-c", load], cwd="/", capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    modules, named = json.loads(done.stdout)
    assert "tools.worker.judged" in modules
    assert [m for m in modules if m.startswith("tools.instructor")] == []
    from traitlets.utils.importstring import import_item

    assert [n.rpartition(".")[0] for n in named] == ["tools.instructor.feedback"] * 3
    assert [import_item(n).__name__ for n in named] == [
        "HideHiddenTests", "WaitingAnswers", "FeedbackExporter"]


def test_normlib_names_every_module_it_holds():
    """normlib/__init__.py's __all__ is every public module of the package, each imported as
    normlib.<name> on first use, and its docstring (the student's map of it) names each,
    and the provided private ones (_validation, _channels)."""
    import normlib

    files = sorted(p.stem for p in (REPO / "solutions" / "normlib").glob("*.py")
                   if p.stem != "__init__")
    modules = [m for m in files if not m.startswith("_")]
    assert sorted(normlib.__all__) == modules
    assert [m for m in modules if f"``normlib.{m}``" not in normlib.__doc__] == []
    assert [m for m in files if m.startswith("_") and f"{m}:" not in normlib.__doc__] == []
    assert [getattr(normlib, m).__name__ for m in modules] == [f"normlib.{m}" for m in modules]


ALONE = {"numpy", "torch", "numba", "normlib"}  # what normlib/ may import beside Python's own


def foreign_imports(folder):
    """{file name: [module]} of the imports of a normlib/ folder's files that name neither
    Python's standard library nor ALONE (relative imports are the package's own)."""
    import sys

    found = {}
    for path in sorted(Path(folder).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            for name in names:
                top = name.split(".")[0]
                if top not in ALONE and top not in sys.stdlib_module_names:
                    found.setdefault(path.name, []).append(name)
    return found


def test_normlib_stands_alone():
    """A student reading normlib/ never has to open normkit/ (issue 61): the reference's
    files and the student edition's import NumPy, torch, Numba, normlib and Python's own
    modules only; the provided helpers are normlib's private modules."""
    for folder in (REPO / "solutions" / "normlib", REPO / "normlib"):
        assert foreign_imports(folder) == {}, folder


def test_a_normlib_file_importing_the_course_is_found(tmp_path):
    (tmp_path / "batch_norm.py").write_text("import numpy as np\nfrom . import _channels\n"
                                            "from normkit.channels import per_channel\n")
    (tmp_path / "dyt.py").write_text("import math, os.path\nimport scipy.special\n"
                                     "def f():\n    import tools.course\n")
    assert foreign_imports(tmp_path) == {"batch_norm.py": ["normkit.channels"],
                                         "dyt.py": ["scipy.special", "tools.course"]}


STEPS = {"submitted", "autograded", "feedback", "staging"}  # the course's per-submission folders


def hand_built_paths(files):
    """["file:line", ...] of each `... / "submitted"` (or another of STEPS) among these
    files' code: a submission's folder is made by tools.course.folder.submission_folder
    alone (issue 61)."""
    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and \
                    isinstance(node.right, ast.Constant) and node.right.value in STEPS:
                found.append(f"{path.name}:{node.lineno}")
    return found


def test_every_submission_folder_is_made_by_the_path_helper(tmp_path):
    files = [p for p in sorted((REPO / "tools").rglob("*.py"))]
    helper = REPO / "tools" / "course" / "folder.py"
    assert hand_built_paths(files) == [] and helper in files
    assert "return Path(root) / step\n" in helper.read_text()
    planted = tmp_path / "planted.py"
    planted.write_text('from pathlib import Path\n\ndef f(root, s, a):\n'
                       '    return Path(root) / "autograded" / s / a\n')
    assert hand_built_paths([planted]) == ["planted.py:4"]


def course_json_readers(files):
    """The names of these files whose code names "course.json": the course's plan is read
    and written by tools.course.folder.Course alone (issue 61)."""
    return sorted({path.name for path in files for node in ast.walk(ast.parse(path.read_text()))
                   if isinstance(node, ast.Constant) and node.value == "course.json"})


def test_the_course_plan_is_read_by_the_course_object_alone(tmp_path):
    assert course_json_readers(sorted((REPO / "tools").rglob("*.py"))) == ["folder.py"]
    planted = tmp_path / "planted.py"
    planted.write_text('import json\n\ndef plan(root):\n'
                       '    return json.loads((root / "course.json").read_text())\n')
    assert course_json_readers([planted]) == ["planted.py"]


DOCSTRING_LINES = 15  # issue 61: what a module does and why now; the rest is docs/design.md's


def long_docstrings(files):
    """"path (N lines)" of each of these modules whose docstring, quotes included, runs over
    DOCSTRING_LINES lines."""
    found = []
    for path in files:
        tree = ast.parse(path.read_text())
        first = tree.body[0] if tree.body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and \
                isinstance(first.value.value, str):
            lines = first.end_lineno - first.lineno + 1
            if lines > DOCSTRING_LINES:
                found.append(f"{path.relative_to(path.parents[1]).as_posix()} ({lines} lines)")
    return found


def test_every_module_docstring_says_what_and_why_in_a_screen(tmp_path):
    files = [p for folder in ("tools", "normkit", "solutions/normlib", "normlib", "tests")
             for p in sorted((REPO / folder).rglob("*.py"))]
    assert len(files) > 150 and long_docstrings(files) == []
    planted = tmp_path / "zone" / "planted.py"
    planted.parent.mkdir()
    planted.write_text('"""A module.\n' + "More.\n" * 14 + '"""\n\nX = 1\n')
    assert long_docstrings([planted]) == ["zone/planted.py (16 lines)"]
    planted.write_text('"""A module.\n' + "More.\n" * 13 + '"""\n\nX = 1\n')
    assert long_docstrings([planted]) == []
