"""make test's first step (tools/maintainer/system_packages.py): the system packages installed where
apt-get can run without a question, else one message before any test, in seconds. Each
branch runs here whatever this machine is: the programs it looks for live in a folder the
test makes, apt-get and sudo are stand-ins, and root or not is an argument."""

import os
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO
from tools.maintainer.system_packages import install_command, missing, packages, refusal

FAKE_APT = """#!/bin/sh
# a stand-in apt-get: `install` fails until `update` ran, then puts the program in place
# (a bwrap that makes any sandbox, a chromium, an initdb); it has no chromium where {ubuntu}
echo "$@" >> "{folder}/apt.log"
case "$1 $4" in
  update*) : > "{folder}/updated" ;;
  "install chromium") [ -n "{ubuntu}" ] && echo "E: Package 'chromium' has no installation candidate" >&2 && exit 100
    [ -e "{folder}/updated" ] || exit 100
    printf '#!/bin/sh\\nexit 0\\n' > "{folder}/chromium"; /bin/chmod +x "{folder}/chromium" ;;
  "install bubblewrap") [ -e "{folder}/updated" ] || exit 100
    printf '#!/bin/sh\\nexit 0\\n' > "{folder}/bwrap"; /bin/chmod +x "{folder}/bwrap" ;;
  "install postgresql") printf '#!/bin/sh\\n' > "{folder}/initdb"; /bin/chmod +x "{folder}/initdb" ;;
  "install unzip") printf '#!/bin/sh\\n' > "{folder}/unzip"; /bin/chmod +x "{folder}/unzip" ;;
esac
"""
FAKE_SUDO = '#!/bin/sh\n[ "$1" = -n ] && shift\nexec "$@"\n'  # a sudo that asks nothing


def executable(path, text):
    path.write_text(text)
    path.chmod(0o755)


def machine(tmp_path, programs, ubuntu=False):
    """A PATH of one folder holding python3, env and these stand-ins {name: script}, and
    nothing else (no bwrap, no Chromium, no apt-get unless given)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "python3").symlink_to(sys.executable)
    (folder / "env").symlink_to("/usr/bin/env")
    for name, script in programs.items():
        executable(folder / name, script.format(folder=folder, ubuntu="yes" if ubuntu else ""))
    return folder


def make_test_step(folder):
    """The step as make test runs it, on the machine of folder; (exit status, output, s)."""
    start = time.monotonic()
    run = subprocess.run(["python3", "-m", "tools.maintainer.system_packages"], cwd=REPO,
                         capture_output=True, text=True, timeout=60,
                         env={"PATH": str(folder), "HOME": str(folder),
                              "COURSE_CHROMIUM": str(folder / "chromium"),
                              "COURSE_INITDB": str(folder / "initdb")})
    return run.returncode, run.stdout + run.stderr, time.monotonic() - start


def test_without_a_way_to_install_it_stops_at_once_naming_each_package(tmp_path):
    code, output, seconds = make_test_step(machine(tmp_path, {}))
    assert code == 1 and seconds < 10
    first, *rest = output.splitlines()
    assert first == "make test: missing system packages, so no test was run:"
    assert rest[0].startswith("  bubblewrap (bwrap): ")
    assert rest[1].startswith(f"  chromium ({tmp_path / 'bin' / 'chromium'}): ")
    assert rest[2].startswith(f"  postgresql ({tmp_path / 'bin' / 'initdb'}): ")
    assert rest[3].startswith("  unzip (unzip): ")
    assert "  Debian: sudo apt-get install bubblewrap chromium postgresql unzip" in rest
    assert "  Fedora: sudo dnf install bubblewrap chromium postgresql-server unzip" in rest
    assert any("COURSE_CHROMIUM" in line for line in rest)


def test_with_apt_get_it_installs_them_updating_the_lists_if_it_must(tmp_path):
    folder = machine(tmp_path, {"apt-get": FAKE_APT, "sudo": FAKE_SUDO})
    code, output, _ = make_test_step(folder)
    assert code == 0, output
    assert output.startswith("make test: installing bubblewrap, chromium, postgresql, unzip "
                             "(system")
    assert (folder / "apt.log").read_text().splitlines() == [
        "install -y -q bubblewrap", "update -q", "install -y -q bubblewrap",
        "install -y -q chromium", "install -y -q postgresql", "install -y -q unzip"]
    assert output.splitlines()[-1] == ("make test: system packages present: "
                                       f"bubblewrap ({folder / 'bwrap'}), "
                                       f"chromium ({folder / 'chromium'}), "
                                       f"postgresql ({folder / 'initdb'}), "
                                       f"unzip ({folder / 'unzip'})")


def test_an_install_that_fails_ends_in_the_message(tmp_path):
    folder = machine(tmp_path, {"apt-get": "#!/bin/sh\necho no network >&2\nexit 100\n",
                                "sudo": FAKE_SUDO})
    code, output, _ = make_test_step(folder)
    assert code == 1
    assert "apt-get install -y -q bubblewrap failed:\nno network" in output
    assert "apt-get install -y -q chromium failed:\nno network" in output
    assert "apt-get install -y -q postgresql failed:\nno network" in output
    assert "apt-get install -y -q unzip failed:\nno network" in output
    assert output.splitlines()[-1].startswith("  Chromium elsewhere (Ubuntu: sudo snap")


def test_where_apt_has_no_chromium_bubblewrap_is_installed_and_chromium_named(tmp_path):
    folder = machine(tmp_path, {"apt-get": FAKE_APT, "sudo": FAKE_SUDO}, ubuntu=True)
    code, output, _ = make_test_step(folder)
    assert code == 1 and (folder / "bwrap").exists()
    assert "has no installation candidate" in output
    message = output[output.index("make test: missing system packages"):].splitlines()
    assert message[1].startswith("  chromium (") and "bubblewrap (" not in "\n".join(message)
    assert "(Ubuntu: sudo snap install chromium)" in message[-1]


def test_a_bubblewrap_that_cannot_make_a_sandbox_is_refused(tmp_path):
    folder = machine(tmp_path, {"bwrap": "#!/bin/sh\necho 'setting up uid map: "
                                         "Permission denied' >&2\nexit 1\n",
                                "chromium": "#!/bin/sh\n", "initdb": "#!/bin/sh\n",
                                "unzip": "#!/bin/sh\n"})
    code, output, _ = make_test_step(folder)
    assert code == 1
    assert output.startswith("make test: no test was run. bubblewrap is installed but cannot "
                             "make grading's sandbox here")
    assert "setting up uid map: Permission denied" in output
    assert "kernel.apparmor_restrict_unprivileged_userns=0" in output


@pytest.mark.parametrize("euid, has_apt, sudo, expected", [
    (0, True, False, ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get"]),
    (1000, True, True, ["sudo", "-n", "env", "DEBIAN_FRONTEND=noninteractive", "apt-get"]),
    (1000, True, False, None),  # a sudo that asks a password: make test never waits for one
    (0, False, True, None),  # no apt-get (macOS, Fedora)
])
def test_who_can_install(euid, has_apt, sudo, expected):
    assert install_command(euid, has_apt, sudo) == expected


def test_the_programs_and_the_message(tmp_path):
    chromium, initdb = tmp_path / "chrome", tmp_path / "initdb"
    needed = packages({"COURSE_CHROMIUM": str(chromium), "COURSE_INITDB": str(initdb)})
    assert [(p.name, p.program) for p in needed] == [("bubblewrap", "bwrap"),
                                                     ("chromium", str(chromium)),
                                                     ("postgresql", str(initdb)),
                                                     ("unzip", "unzip")]
    assert missing(needed, path=str(tmp_path)) == list(needed)
    executable(chromium, "#!/bin/sh\n")
    executable(initdb, "#!/bin/sh\n")
    executable(tmp_path / "unzip", "#!/bin/sh\n")
    assert missing(needed, path=str(tmp_path)) == [needed[0]]
    text = refusal([needed[1]])
    assert "bubblewrap" not in text and "sudo apt-get install chromium" in text


def test_a_subset_is_checked_alone(tmp_path):
    folder = machine(tmp_path, {"chromium": "#!/bin/sh\n"})  # no bwrap, no apt-get
    run = subprocess.run(["python3", "-m", "tools.maintainer.system_packages", "chromium"], cwd=REPO,
                         capture_output=True, text=True, env={
                             "PATH": str(folder), "COURSE_CHROMIUM": str(folder / "chromium")})
    assert run.returncode == 0 and run.stdout.startswith("make test: system packages present: "
                                                         "chromium (")


def test_make_lab_and_make_check_need_no_system_package():
    def commands(*targets):
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL")}
        return subprocess.run(["make", "--no-print-directory", "-n", *targets], cwd=REPO,
                              capture_output=True, text=True, check=True, env=env).stdout

    assert "tools.maintainer.system_packages" not in commands("lab", "check")
    assert "tools.maintainer.system_packages" in commands("test").splitlines()[0]  # and first


def test_the_readme_says_what_make_test_installs():
    """One paragraph of the README: what make test installs, how, and that a student's
    commands need none of them."""
    paragraphs = (REPO / "README.md").read_text().split("\n\n")
    [paragraph] = [p for p in paragraphs if "tools/maintainer/system_packages.py" in p]
    for words in ("`make test` needs four system packages", "bubblewrap", "Chromium",
                  "unzip", "PostgreSQL", "apt-get", "root", "sudo", "`make lab`",
                  "`make check` need none of them"):
        assert words in paragraph, words

