# The course's commands. Students: `make lab`, `make check`. Everything: `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
PIP_VERSION := 26.3
EX ?=
COURSE_DIR ?= build/course
# Instructors: LAYOUT=unit (one assignment per unit) or course (one for the whole course);
# A="unit1 unit2" for some assignments only (default all); STUDENT="s1004 s1007" to grade
# these students' submissions again; JOBS grading processes (default one per core), or
# SCHEDULER=tcp://host:8786 to grade on a Dask cluster's workers (docs/instructors.md, "More
# than one machine"); ARGS more flags, e.g. ARGS=--exchange, ARGS=--execute or
# ARGS="--timeout 60 --force".
LAYOUT ?= unit
A ?=
STUDENT ?=
JOBS ?=
SCHEDULER ?=
ARGS ?=
LMS ?=
INSTRUCTOR := $(PY) -m tools.instructor
# Extra flags for `make lab`, e.g. LAB_ARGS="--port=8899 --no-browser".
LAB_ARGS ?=

# Prerequisites are made in order, left to right, even under `make -j` (or -j in MAKEFLAGS):
# make test's system packages must come first (GNU make 4.3, Debian 12's, has no .WAIT).
.NOTPARALLEL:

.PHONY: lab check bench test system-packages student outputs notebook-times screenshots clean \
	build release collect autograde feedback grades rubric grading-bench formgrader \
	scheduler worker score system-packages-bubblewrap

# Create the virtual environment if missing and install the pinned packages and
# normlib and normkit (editable, so notebooks/ import your normlib/). Redone when
# pyproject.toml changes.
# pip first, pinned: the one a venv starts with is Python's bundled pip (23.2 for Debian's
# 3.11), whose resolver took 23 s of CPU over these pins, and pip 26.3's 10 (it tests each
# index link's wheel tags faster); the upgrade itself takes a second.
# rfc3987-syntax goes: jsonschema's format-nongpl extra (from jupyter-events) brings it to
# check the "iri" format, which no Jupyter or nbgrader schema uses, and it builds a Lark
# grammar on import, 2.5 s of CPU in every process that imports nbformat: each nbgrader
# command, its alembic, each pytest worker (python-jsonschema/jsonschema#1392, #1521).
# Then byte-compile them on every core (pip compiles on one): grading kernels may not write
# __pycache__ into the environment, and where PYTHONDONTWRITEBYTECODE is set (as on some CI
# machines) no process does, so every import of an uncompiled module compiles it again
# (Dask, nbgrader and SQLAlchemy: a second more for each grading worker). Left out: the
# packages' own tests/ folders and pip (which nothing but pip imports). Like pip, this
# passes over the few files that are not Python 3.11, hence the `|| true`.
$(INSTALLED): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile pip==$(PIP_VERSION)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile -e .
	$(PY) -m pip uninstall --quiet --disable-pip-version-check --yes rfc3987-syntax
	$(PY) -m compileall -q -j 0 -x '/tests/|site-packages/pip/' \
		"$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
		> /dev/null || true
	touch $@

# JupyterLab on the course, opened on notebooks/, with nbgrader's menu cut to what works for
# a student (tools/student/lab.py says what and why).
lab: $(INSTALLED)
	$(PY) -m tools.student.lab $(LAB_ARGS)

# Which exercises pass: your normlib/ against each exercise's visible checks (EX=1.1 for one).
check: $(INSTALLED)
	$(PY) -m tools.student.check $(EX)

# Your LayerNorm kernels (naive 1.2/2.2, fast 7.1/7.2) timed against torch, about 20 s.
# REFERENCE=1 times the reference's (solutions/normlib: the README's figures);
# BENCH_ARGS="--sizes 1024 --rounds 5" for less.
BENCH_ARGS ?=
bench: $(INSTALLED)
	cd $(if $(REFERENCE),solutions,.) && $(abspath $(PY)) -m normkit.benchmark $(BENCH_ARGS)

# make test's system packages, before anything else (tools/maintainer/system_packages.py): bubblewrap
# (grading's sandbox), Chromium (the browser test), PostgreSQL (the shared gradebook's
# tests) and unzip (collect's tests), installed with apt-get as root or with a sudo that
# asks no password; elsewhere one message naming what to install. Then the sandbox probe:
# a bwrap that cannot make grading's sandbox here stops it too.
system-packages:
	@python3 -m tools.maintainer.system_packages

# The whole course check (CI runs this on a fresh clone): the system packages first (make
# builds prerequisites left to right, .NOTPARALLEL above), so a missing one stops it at once,
# before the environment is made. Two pytest workers: the longest files are collected
# first, the grading round trip (2 to 3 minutes) before all (tests/conftest.py), and
# --no-loadscope-reorder keeps that order (xdist otherwise starts the files with the most
# tests first), so that it starts at once, everything else runs beside it, and short files
# end the run on both workers; --dist loadfile keeps each notebook, and each module-scoped
# fixture, on one worker.
test: system-packages $(INSTALLED)
	$(VENV)/bin/ruff check .
	$(PY) -m compileall -q -j 0 tools solutions normkit normlib tests > /dev/null  # (as above)
	$(PY) -m pytest tests solutions --nbval --nbval-current-env \
		--nbval-sanitize-with tests/nbval_sanitize.cfg -n 2 --dist loadfile --no-loadscope-reorder --durations=5

# Authors: docs/screenshots/, JupyterLab as a student sees it (tests/test_browser.py's
# steps; needs Chromium).
screenshots: $(INSTALLED)
	@python3 -m tools.maintainer.system_packages chromium
	COURSE_SCREENSHOTS=$(CURDIR)/docs/screenshots COURSE_REQUIRE_BROWSER=1 \
		$(PY) -m pytest tests/test_browser.py

# Authors: regenerate the student edition (notebooks/, normlib/) from solutions/.
student: $(INSTALLED)
	$(PY) -m tools.maintainer.edition

# Authors: re-execute the solution notebooks so their stored outputs are current.
outputs: $(INSTALLED)
	cd solutions && ../$(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace [0-9]*.ipynb

# Authors: each solution notebook run in full as Run All runs it, one at a time in a fresh
# kernel, its wall and CPU time printed against the course's rule of a minute (run it on a
# quiet machine). NB=07 for one (or NB="04 05"); NB_ARGS=--student for the student edition.
NB ?=
NB_ARGS ?=
notebook-times: $(INSTALLED)
	$(PY) -m tools.maintainer.notebook_times $(NB_ARGS) $(NB)

# Instructors, one command per step (README, "For instructors and maintainers"; tools/instructor/):
# the nbgrader course in COURSE_DIR, built from solutions/ ...
build: $(INSTALLED)
	$(INSTRUCTOR) build $(COURSE_DIR) --layout $(LAYOUT)

# ... release/<assignment>/ for the students (scanned for solutions), ...
release: $(INSTALLED)
	$(INSTRUCTOR) release $(COURSE_DIR) $(A) $(ARGS)

# ... submissions from the LMS's download in downloaded/<assignment>/archive/ (or the
# exchange; DRY_RUN=1: print what would be collected and rejected, touching nothing), ...
DRY_RUN ?=
collect: $(INSTALLED)
	$(INSTRUCTOR) collect $(COURSE_DIR) $(A) $(if $(filter-out 0,$(DRY_RUN)),--dry-run) $(ARGS)

# ... each new or changed submission graded once, by the judge (STUDENT: these again), ...
autograde: $(INSTALLED)
	$(INSTRUCTOR) autograde $(COURSE_DIR) $(A) $(foreach s,$(STUDENT),--student $(s)) \
		$(if $(JOBS),--jobs $(JOBS)) $(if $(SCHEDULER),--scheduler $(SCHEDULER)) $(ARGS)

# The scheduler of a Dask cluster, on this machine (the head, which keeps the course), on
# PORT: `make worker SCHEDULER=tcp://<this host>:$(PORT)` on each grading machine, then
# `make autograde SCHEDULER=...` here. It unpickles the tasks it schedules, so it imports
# the course's code (tools/): without PYTHONPATH every task fails to deserialize ("Error
# during deserialization of the task graph"), the reason only in its own log.
# docs/instructors.md, "More than one machine".
PORT ?= 8786
scheduler: $(INSTALLED)
	PYTHONPATH=$(CURDIR) $(VENV)/bin/dask scheduler --port $(PORT) --no-dashboard

# A grading worker of a Dask cluster, on this machine, for `make autograde SCHEDULER=...`:
# JOBS processes (default one per core) of one thread, each grading one submission at a
# time in the OS sandbox; none starts where bubblewrap cannot make it (the probe of
# tools/maintainer/system_packages.py, first). docs/instructors.md, "More than one machine".
worker: system-packages-bubblewrap $(INSTALLED)
	@test -n "$(SCHEDULER)" || { echo "make worker: set SCHEDULER=tcp://host:8786"; exit 2; }
	PYTHONPATH=$(CURDIR) $(VENV)/bin/dask worker $(SCHEDULER) --nthreads 1 \
		--nworkers $(or $(JOBS),$(shell nproc)) --memory-limit 0 --no-dashboard

system-packages-bubblewrap:
	@python3 -m tools.maintainer.system_packages bubblewrap

# ... feedback/<student>/<assignment>/*.html and feedback_zips/<assignment>/<student>.zip
# (LMS=moodle|canvas: also feedback_upload/<assignment>-<lms>.zip, for the LMS's bulk upload), ...
feedback: $(INSTALLED)
	$(INSTRUCTOR) feedback $(COURSE_DIR) $(A) $(if $(LMS),--lms $(LMS)) $(ARGS)

# ... and COURSE_DIR/grades.csv, with each check's points and the late policy's penalty
# (logs/late.csv: each decision); LMS=canvas|moodle|blackboard|brightspace TEMPLATE=export.csv
# (in COURSE_DIR, or an absolute path) also fills in the LMS's gradebook export as COURSE_DIR/grades-<lms>.csv (tools/instructor/grade_sheet.py).
TEMPLATE ?=
grades: $(INSTALLED)
	$(INSTRUCTOR) grades $(COURSE_DIR) $(A) $(if $(LMS),--lms $(LMS)) \
		$(if $(TEMPLATE),--template $(call quoted,$(TEMPLATE))) $(ARGS)

# A written answer's points by hand (or a check's, over the judge's), as formgrader saves
# them, and COMMENT if given (tools/instructor/score.py): A, STUDENT and QUESTION name one each,
# e.g. make score A=unit1 STUDENT=alice QUESTION=q1_1_why_eps POINTS=1.5 COMMENT="...".
# From another folder: make -C /path/to/this/repository score COURSE_DIR=/abs/path ...
QUESTION ?=
POINTS ?=
COMMENT ?=
quoted = '$(subst ','\'',$(1))'
score: $(INSTALLED)
	$(INSTRUCTOR) score $(COURSE_DIR) --assignment $(call quoted,$(A)) \
		--student $(call quoted,$(STUDENT)) --question $(call quoted,$(QUESTION)) \
		--points $(call quoted,$(POINTS)) $(if $(COMMENT),--comment $(call quoted,$(COMMENT)))

# ... COURSE_DIR/rubric.html: each written question's model answer and rubric, for graders.
rubric: $(INSTALLED)
	$(INSTRUCTOR) rubric $(COURSE_DIR)

# JupyterLab in the built course, with nbgrader's formgrader (its gradebook needs the
# environment's `alembic` on PATH).
formgrader: $(INSTALLED)
	cd $(COURSE_DIR) && PATH="$(abspath $(VENV))/bin:$$PATH" NORMLIB_REPO=$(CURDIR) \
		$(abspath $(VENV))/bin/jupyter lab \
		$(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

# Whole-course submissions per minute with 1 and 2 jobs (or JOBS), judge-only and with
# --execute: an honest class of 10 (tests/grading_bench.py; several minutes).
grading-bench: $(INSTALLED)
	$(PY) -m tests.grading_bench $(if $(JOBS),--jobs $(JOBS)) $(ARGS)

clean:
	rm -rf build .pytest_cache .ruff_cache
