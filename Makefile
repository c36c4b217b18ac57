# Two commands on a fresh machine: `make demo` and `make test` (each builds .venv).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint format bench clean clean-cache share

$(BIN)/sudoku-batch: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.test-deps: $(BIN)/sudoku-batch
	$(BIN)/pip install --quiet -e '.[test]'
	$(MAKE) share
	touch $@

share: $(BIN)/sudoku-batch  ## the race's clause sharing: share/ over python-sat's CaDiCaL 1.9.5 (needs g++), else Debian's
	( root=$$($(BIN)/python share/cadical.py build/cadical) \
	  && $(BIN)/pip install --quiet ./share --config-settings=cmake.define.CADICAL_ROOT=$$root ) \
	|| $(BIN)/pip install --quiet ./share \
	|| echo "share/ not built (needs g++, and CaDiCaL: python-sat's sdist or libcadical-dev): races share no learnt clauses"

demo: $(BIN)/sudoku-batch  ## solve the bundled sample corpus on this machine (no Redis)
	mkdir -p out
	$(BIN)/sudoku-batch solve client/samples/sample.txt -o out/demo.jsonl --report out/demo.html
	@echo "results: out/demo.jsonl  report: out/demo.html"

test: $(VENV)/.test-deps  ## lint, then the whole suite (integration tests need redis-server)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m worker.warm
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=40

lint: $(VENV)/.test-deps
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format: $(VENV)/.test-deps
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

bench: $(VENV)/.test-deps
	$(BIN)/python bench/solvers.py
	$(BIN)/python bench/pipeline.py
	$(BIN)/python bench/portfolio.py
	$(BIN)/python bench/generator.py

clean-cache:  ## drop numba's compiled caches (after editing a module kernels call, e.g. solvers/kernel/bits.py)
	find solvers pipeline -name "*.nbi" -delete -o -name "*.nbc" -delete

clean:
	rm -rf $(VENV) out .pytest_cache .ruff_cache
