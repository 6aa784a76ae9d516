# loopscale: `make demo` and `make test` work on a fresh machine (they create .venv first).
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
# The `cpu` extra pins torch==2.13.0 in the same pip command as everything else, so pip never pulls a
# multi-GB CUDA build. GPU users: install your CUDA torch into the venv first, then `make install EXTRAS=dev`.
EXTRAS ?= cpu,dev
PYTEST_ARGS ?=
DEMO_ARGS ?=

# The lowest torch loopscale supports (pyproject.toml): `make test-torch-floor` runs the compile and training
# smoke tests (pytest -m torch_floor) in a venv of its own with it. PyPI has no CPU-only build of it, so its
# CUDA build comes with its CUDA libraries (~2.6 GB download; README "Tests and benchmarks" has the cost).
TORCH_FLOOR ?= 2.11.0
FLOOR_VENV ?= .venv-torch-floor

.PHONY: install demo demo-measured test test-unit test-slow test-all install-torch-floor test-torch-floor lint bench mutations gpu-bundle clean

# Where `make bench` trains its measurements (the fork-fidelity runs).
BENCH_OUT ?= .bench

# Says what it does: the first install downloads torch and Lightning (a few minutes); pip lists what it fetches.
$(BIN)/.installed: pyproject.toml
	@echo "make install: creating the virtual environment $(VENV) with $(PYTHON)"
	$(PYTHON) -m venv $(VENV)
	@echo "make install: upgrading pip"
	$(BIN)/pip install --quiet --upgrade pip
	@echo "make install: installing loopscale (editable) with the extras [$(EXTRAS)]: torch, Lightning, Hydra, scipy, ..."
	@echo "make install: the first time this downloads ~1 GB and takes a few minutes; pip shows each package"
	$(BIN)/pip install -e '.[$(EXTRAS)]'
	@echo "make install: done; the commands are in $(BIN) (loopscale, loopscale-train)"
	touch $@

install: $(BIN)/.installed

demo: install
	$(BIN)/loopscale demo $(DEMO_ARGS)

# the demo's grid at three seeds (132 runs; `make demo` trains two), the cheapest design `loopscale power` expects to
# read phi at N_ref within the verdict's width (docs/results.md, "A demo that measures phi"), ~20 min on 2 idle
# cores; its own output directory (seeds 0-1 are the plain demo's, trained again there)
demo-measured: install
	$(BIN)/loopscale demo --seeds 3 --out runs/demo_measured $(DEMO_ARGS)

# notebooks/phi_diagnostics.ipynb executed on your sweep into an HTML page with every output, e.g.
# `make notebook NOTEBOOK_ARGS="runs/mine --fit fits/mine.json --out mine.html"` (`loopscale notebook --help`);
# with no arguments: the demo's runs/demo, else the test fixtures, into ./phi_diagnostics.html
NOTEBOOK_ARGS ?=
.PHONY: notebook
notebook: install
	$(BIN)/loopscale notebook $(NOTEBOOK_ARGS)

# Tests in three tiers, one folder each (tests/conftest.py): tests/unit (in-process, no corpus, no child
# process), tests/integration (corpus, training and the CLI's main in-process), tests/system (processes,
# signals, SLURM, the wheel). `slow` marks the long checks of any tier.
# The suites run on every core (pytest-xdist, at most 4 workers: each one imports torch and prepares its own
# corpus), then the SLURM tests in one process: the test cluster is one per machine (slurm/cluster.sh), started
# and stopped by the session that uses it (xdist's loadgroup cannot keep them on one worker under pytest 9.2,
# which ignores the group suffix xdist 3.8 writes into item._nodeid). Run beside the xdist part instead of after
# it, they made the default suite slower, not faster (1868 s against 1692 s in a fresh-clone .ci/run: their jobs
# train on the same two cores). PYTEST_WORKERS=0: one process.
PYTEST_WORKERS ?= auto
XDIST = -n $(PYTEST_WORKERS) --maxprocesses 4
# pytest exits 5 when a selection (PYTEST_ARGS="-k ...") leaves no SLURM test: nothing to run is not a failure
SLURM_ONLY = || [ $$? -eq 5 ]
# test-unit: the unit tier, under 3 minutes on two cores
test-unit: install
	$(BIN)/pytest tests/unit -m "unit and not slow" $(XDIST) $(PYTEST_ARGS)

# the default suite: every tier but the slow checks
test: install
	$(BIN)/pytest -m "not slow and not slurm" $(XDIST) $(PYTEST_ARGS)
	$(BIN)/pytest -m "slurm and not slow" $(PYTEST_ARGS) $(SLURM_ONLY)

# ruff, configured in pyproject.toml: the format check and the lint rules
lint: install
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

test-slow: install
	$(BIN)/pytest -m "slow and not slurm" $(XDIST) $(PYTEST_ARGS)
	$(BIN)/pytest -m "slow and slurm" $(PYTEST_ARGS) $(SLURM_ONLY)

test-all: install
	$(BIN)/pytest -m "not slurm" $(XDIST) $(PYTEST_ARGS)
	$(BIN)/pytest -m "slurm" $(PYTEST_ARGS) $(SLURM_ONLY)

$(FLOOR_VENV)/bin/.installed: pyproject.toml
	$(PYTHON) -m venv $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/pip install --quiet --upgrade pip
	$(FLOOR_VENV)/bin/pip install --quiet --no-cache-dir torch==$(TORCH_FLOOR)
	$(FLOOR_VENV)/bin/pip install --quiet -e '.[dev]'
	$(FLOOR_VENV)/bin/python -c "import torch; assert torch.__version__.startswith('$(TORCH_FLOOR)'), torch.__version__"
	touch $@

install-torch-floor: $(FLOOR_VENV)/bin/.installed

# in one process: its compile tests ran 217 s on two workers of one thread each, 153 s here with two threads
test-torch-floor: install-torch-floor
	$(FLOOR_VENV)/bin/pytest -m torch_floor $(PYTEST_ARGS)

# wheels benchmarks/gpu_check.py needs on a GPU node without network, into .whl/ (benchmarks/gpu_bundle.sh)
gpu-bundle:
	PYTHON=$(PYTHON) bash benchmarks/gpu_bundle.sh

# benchmarks/bench_*.py, then the measurements that are no tests: a forked WSD branch against the recipe's
# own run at 2000 steps, d64 and d96 (fails above 1%; ~20 min on two idle cores)
bench: install
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done
	$(BIN)/python benchmarks/bench_forks.py --fidelity $(BENCH_OUT)/fork-fidelity --steps 2000 --max-rel-diff 0.01

# benchmarks/mutations.py: does the suite guard what the docs promise? Each curated mutation of the code is
# applied to a scratch copy of the tree and the tests that must catch it run there; prints caught / applied,
# the survivors and the stale snippets (code that moved). MUTATION_ARGS="--check" only checks the snippets,
# "--only ID,ID" runs some, "--list" names them all.
MUTATION_ARGS ?=
mutations: install
	$(BIN)/python benchmarks/mutations.py $(MUTATION_ARGS)

clean:
	rm -rf $(VENV) $(FLOOR_VENV) .pytest_cache .whl $(BENCH_OUT)
