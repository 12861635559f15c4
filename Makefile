# The template's commands. `make demo` and `make test` work on a fresh machine: each sets up
# .venv (torch first, then the locked versions) and then does its job.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PROJECT_LOCK := {{cookiecutter.project_slug}}/constraints.txt

.PHONY: setup demo test test-fast lint clean

setup: $(VENV)/.done  ## create .venv with everything the template and its projects need

$(VENV)/.done: constraints.txt $(PROJECT_LOCK)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q "$$(grep '^torch==' '$(PROJECT_LOCK)')"
	$(PY) -m pip install -q -r '$(PROJECT_LOCK)' -r constraints.txt
	touch $@

demo: setup  ## generate a project with the default answers into build/ and train it
	rm -rf build/my-project
	$(VENV)/bin/cookiecutter --no-input --output-dir build .
	$(PY) -m pip install -q --no-deps --no-build-isolation -e build/my-project
	cd build/my-project && ../../$(PY) train.py

test: setup lint  ## every test: the template's and, in subprocesses, each baked project's
	$(PY) -m pytest

test-fast: setup  ## the template's tests without the full bake-and-test matrix
	$(PY) -m pytest -m "not matrix"

lint: setup  ## ruff on the template's own code
	$(PY) -m ruff check hooks tests
	$(PY) -m ruff format --check hooks tests

clean:
	rm -rf $(VENV) build
