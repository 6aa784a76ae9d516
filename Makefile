# loopscale: `make demo` and `make test` work on a fresh machine (they create .venv first).
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
# The `cpu` extra pins torch==2.13.0 in the same pip command as everything else, so pip never pulls a
# multi-GB CUDA build. GPU users: install your CUDA torch into the venv first, then `make install EXTRAS=dev`.
EXTRAS ?= cpu,dev
PYTEST_ARGS ?=
DEMO_ARGS ?=

.PHONY: install demo test test-slow test-all lint bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[$(EXTRAS)]'
	touch $@

install: $(BIN)/.installed

demo: install
	$(BIN)/loopscale demo $(DEMO_ARGS)

test: install
	$(BIN)/pytest -m "not slow" $(PYTEST_ARGS)

# ruff, configured in pyproject.toml: the format check and the lint rules
lint: install
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

test-slow: install
	$(BIN)/pytest -m "slow" $(PYTEST_ARGS)

test-all: install
	$(BIN)/pytest $(PYTEST_ARGS)

bench: install
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache
