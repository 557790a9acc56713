# The two front-door commands: `make demo` and `make test`. Each sets everything up first;
# `make test-fast` runs the unit tier alone.
# `make lint` checks the code with ruff (CI runs it first); `make docs` builds the documentation site (warnings are errors); `make wheel-check` builds the
# wheel and the sdist and runs the installed wheel outside the checkout. CI runs all three.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
TORCH  ?= torch==2.13.0

.PHONY: setup demo test test-fast lint format docs option-tables wheel-check clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first and pinned: on a CPU machine this is the CPU build; an unpinned
	# `torch` requirement would pull a multi-GB CUDA build.
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[test,docs,build,lint]"
	touch $@

demo: setup
	$(BIN)/align demo $(DEMO_ARGS)

# two workers on 2 cores (pytest-xdist; a file's tests stay on one worker): development.md, Time.
# Bytecode is cached even where PYTHONDONTWRITEBYTECODE is set: the suite's workers and child
# processes would otherwise compile align and the tests from source again, each of them.
test: setup
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n auto --dist loadfile $(PYTEST_ARGS)

# the unit tier only (tests/unit: pure functions, under a minute), while iterating
test-fast: setup
	$(BIN)/python -m pytest -q tests/unit $(PYTEST_ARGS)

# ruff: the lint rules and the format of pyproject.toml's [tool.ruff]; `make format` rewrites
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

docs: setup
	$(BIN)/mkdocs build --strict --site-dir site
	@echo "site/ built: open site/index.html from disk, or serve it (search needs that): $(BIN)/python -m http.server -d site 8000, then http://127.0.0.1:8000/"

# the option tables of docs/commands, rewritten from the options' declarations
option-tables: setup
	$(BIN)/python -m align.cli.option_tables

wheel-check: setup
	bash .ci/wheel-check

clean:
	rm -rf $(VENV) demo-output site
