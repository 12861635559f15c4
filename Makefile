# The template's commands. `make demo` and `make test` work on a fresh machine: each sets up
# .venv (torch first, then the exact versions in constraints.txt) and then does its job.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: setup demo test test-fast lint bench lock clean help

setup: $(VENV)/.done  ## create .venv with everything the template and every option need

$(VENV)/.done: constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q "$$(grep '^torch==' constraints.txt)"
	$(PY) -m pip install -q -r constraints.txt
	touch $@

demo: setup  ## generate a project with the default answers into build/ and train it
	rm -rf build/my-project
	$(VENV)/bin/cookiecutter --no-input --output-dir build .
	$(PY) -m pip install -q --no-deps --no-build-isolation -e build/my-project
	cd build/my-project && ../../$(PY) train.py

test: setup lint  ## every test: the template's, and each baked project's own suite (full matrix)
	$(PY) -m pytest -n 2 --maxschedchunk 1 --durations=20

test-fast: setup lint  ## the same with the first answer set only (the default's suite, slow tests too)
	$(PY) -m pytest --fast

lint: setup  ## ruff on the template's own code
	$(PY) -m ruff check hooks scripts tests benchmarks
	$(PY) -m ruff format --check hooks scripts tests benchmarks

bench: setup  ## bake time, then a baked project's start-up, end to end and samples/s (benchmarks/)
	$(PY) scripts/bake_time.py
	$(PY) benchmarks/run.py

lock: setup  ## rewrite both locks from .venv after changing a dependency
	$(PY) scripts/lock.py

clean:  ## remove .venv and build/
	rm -rf $(VENV) build

help:  ## list these commands
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'
