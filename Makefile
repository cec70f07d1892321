# Targets the README names. Everything runs inside .venv, created on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo corpus test lint bench clean notebooks browser-deps

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,clients,tokens]'
	touch $(STAMP)

# The main job on bundled data: benchmark the scenarios and the seeded corpus under all four modes,
# print the summary, write the tables and plots into artifacts/.
demo: corpus
	mkdir -p artifacts
	$(BIN)/toolcall-lab bench data/traces data/corpus --jobs 2 \
		--out artifacts/results.csv --plot artifacts/speedup.png

corpus: setup
	test -d data/corpus || $(BIN)/toolcall-lab generate --n 300 --seed 7 --out data/corpus

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy

# Every test: lint, types, unit + property tests, notebooks (nbval).
test: lint
	$(BIN)/python -m pytest --nbval-lax tests notebooks

# Notebooks from notebooks/src, executed so they keep their outputs (bundled data only).
notebooks: setup
	$(BIN)/python notebooks/make_notebooks.py --execute

# What the real-browser check needs besides Chromium: JupyterLab and Playwright's client.
browser-deps: setup
	$(BIN)/python -m pip install -q -e '.[dev,browser]'

# Benchmarks run in their own venv: looptime's pytest plugin would break the test venv.
BENCH := .venv-bench/bin
bench:
	test -x $(BENCH)/python || $(PYTHON) -m venv .venv-bench
	$(BENCH)/python -m pip install -q -e '.[dev,clients,tokens,bench]'
	$(BENCH)/python benchmarks/bench_parse.py
	$(BENCH)/python benchmarks/bench_modes.py
	$(BENCH)/python benchmarks/bench_eager_run.py
	$(BENCH)/python benchmarks/bench_copies.py
	$(BENCH)/python benchmarks/bench_replay.py
	$(BENCH)/python benchmarks/bench_compare.py
	$(BENCH)/python benchmarks/bench_widgets.py
	$(BENCH)/python benchmarks/bench_proxy.py

clean:
	rm -rf $(VENV) .venv-bench build *.egg-info artifacts data/corpus
