# The course's commands. Students: `make lab`, `make check`. Everything: `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
EX ?=
COURSE_DIR ?= build/course
# Extra flags for `make lab`, e.g. LAB_ARGS="--port=8899 --no-browser".
LAB_ARGS ?=

.PHONY: lab check test student course recheck outputs clean

# Create the virtual environment if missing and install the pinned packages and
# normlib (editable, so notebooks/ import your normlib/). Redone when pyproject.toml changes.
$(INSTALLED): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e .
	touch $@

# JupyterLab on the course, with nbgrader's instructor panels (formgrader,
# create-assignment) switched off by tools/jupyter_student/. (Jupyter refuses root
# unless told: containers and CI machines often run as root.)
lab: $(INSTALLED)
	JUPYTER_CONFIG_PATH=$(CURDIR)/tools/jupyter_student $(VENV)/bin/jupyter lab \
		--ServerApp.root_dir=$(CURDIR) --ServerApp.default_url=/lab/tree/notebooks \
		$(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

# Which exercises pass: your normlib/ against each exercise's visible checks (EX=1.1 for one).
check: $(INSTALLED)
	$(PY) -m tools.check $(EX)

# The whole course check (CI runs this on a fresh clone). Two pytest workers: the
# nbgrader round trip (about 2 minutes) runs beside everything else; --dist loadfile keeps
# each notebook, and each module-scoped fixture, on one worker.
test: $(INSTALLED)
	$(VENV)/bin/ruff check .
	$(PY) -m tools.student --check
	$(PY) -m pytest tests solutions --nbval --nbval-current-env \
		--nbval-sanitize-with tests/nbval_sanitize.cfg -n 2 --dist loadfile --durations=5

# Authors: regenerate the student edition (notebooks/, normlib/) from solutions/.
student: $(INSTALLED)
	$(PY) -m tools.student

# Authors: re-execute the solution notebooks so their stored outputs are current.
outputs: $(INSTALLED)
	cd solutions && ../$(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace [0-9]*.ipynb

# Instructors: an nbgrader course directory built from solutions/ (COURSE_DIR=...).
course: $(INSTALLED)
	$(PY) -m tools.course $(COURSE_DIR)

# Instructors, after autograde: re-run every check of each submission in a clean process
# and list where the notebook's score disagrees (a patched check; the clean score counts).
recheck: $(INSTALLED)
	$(PY) -m tools.recheck $(COURSE_DIR)

clean:
	rm -rf build .pytest_cache .ruff_cache
