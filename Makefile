# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Set-up is idempotent; a second run only rebuilds what changed.

VENV      ?= .venv
PY        := $(VENV)/bin/python
MPIRUN    ?= mpirun
MPI_NP    ?= 2
TRACES    ?= ../shared/traces
DEPS      := $(VENV)/.deps-installed
BUILT     := $(VENV)/.ddppo-built
# Python files too: the editable install maps the package's files when it is made, so a new
# module is importable only after a reinstall.
SOURCES   := $(wildcard src/*.cpp src/*.hpp) $(shell find python -name '*.py') CMakeLists.txt \
             pyproject.toml

# Open MPI refuses to run as root unless told; CI and fresh containers run as root.
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
export OMPI_MCA_rmaps_base_oversubscribe := 1
export DDPPO_TRACES := $(abspath $(TRACES))

.PHONY: demo results test lint format bench setup build clean

# Trains on the embedded workload's train part at 2 ranks (about 40 s), then the trained
# policy against every heuristic on its test part.
demo: $(BUILT)
	timeout 1800 $(MPIRUN) -n $(MPI_NP) --oversubscribe $(PY) -m ddppo_hpc.train \
		--config configs/demo.yaml --run-dir runs/demo --force
	$(PY) -m ddppo_hpc.evaluate --checkpoint runs/demo

# README "Results": RLScheduler's protocol on lublin_256's test part. Trains
# configs/lublin256.yaml at $(MPI_NP) ranks on its train part (about 4 minutes; skipped while
# the run directory holds a finished run), evaluates the policy and every heuristic under no
# and EASY backfilling (lublin_256 has no users: EASY++ predictions are the requests), and
# writes the table and plots into docs/results/ and the table into README.md. Quick check:
# `make results RESULTS_UPDATES=5` (its own run directory).
RESULTS_UPDATES ?=
RESULTS_RUN     ?= runs/results-lublin256$(if $(RESULTS_UPDATES),-$(RESULTS_UPDATES))
RESULTS_DIR     ?= docs/results
results: $(RESULTS_RUN)/COMPLETED
	$(PY) -m ddppo_hpc.evaluate --checkpoint $(RESULTS_RUN) --trace $(TRACES)/lublin_256.swf.gz \
		--protocol rlscheduler --backfill none,easy --estimate request --out $(RESULTS_RUN)/results.h5
	$(PY) -m ddppo_hpc.analyze $(RESULTS_RUN)/results.h5 --out $(RESULTS_DIR) \
		--published $(RESULTS_DIR)/published.csv --readme README.md

$(RESULTS_RUN)/COMPLETED: | $(BUILT)
	rm -rf $(RESULTS_RUN)
	timeout 3600 $(MPIRUN) -n $(MPI_NP) --oversubscribe $(PY) -m ddppo_hpc.train \
		--config configs/lublin256.yaml --run-dir $(RESULTS_RUN) \
		data.trace=$(TRACES)/lublin_256.swf.gz $(if $(RESULTS_UPDATES),ppo.updates=$(RESULTS_UPDATES))

test: $(BUILT) lint
	$(PY) -m pytest -q tests
	timeout 600 $(MPIRUN) -n $(MPI_NP) --oversubscribe $(PY) -m pytest -q --color=no -p no:cacheprovider tests/mpi

lint: $(DEPS)
	$(VENV)/bin/ruff check python tests bench tools
	$(VENV)/bin/ruff format --check python tests bench tools
	$(VENV)/bin/clang-format --dry-run --Werror src/*.cpp src/*.hpp

format: $(DEPS)
	$(VENV)/bin/ruff format python tests bench tools
	$(VENV)/bin/ruff check --fix python tests bench tools
	$(VENV)/bin/clang-format -i src/*.cpp src/*.hpp

bench: $(BUILT)
	$(PY) bench/sim_throughput.py --traces $(TRACES)
	$(PY) bench/data_scale.py --traces $(TRACES)
	$(PY) bench/env_throughput.py --traces $(TRACES)
	$(PY) bench/scaling.py
	$(PY) bench/policies.py --trace $(TRACES)/lublin_256.swf.gz

setup: $(DEPS)
build: $(BUILT)

$(DEPS): tools/install-deps.sh
	bash tools/install-deps.sh $(VENV)
	touch $@

$(BUILT): $(DEPS) $(SOURCES)
	$(PY) -m pip install --disable-pip-version-check -q --no-build-isolation -e .
	touch $@

clean:
	rm -rf build $(BUILT)
