# Targets the README names. Everything runs inside .venv, created on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

# The main job on bundled data.
demo: setup
	$(BIN)/toolcall-lab parse data/recordings/scripted_weather_news_stock.sse

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy

# Every test: lint, types, unit + property tests, notebooks (nbval).
test: lint
	$(BIN)/python -m pytest --nbval-lax tests notebooks

bench: setup
	$(BIN)/python -m pip install -q -e '.[bench]'
	$(BIN)/python benchmarks/bench_parse.py

clean:
	rm -rf $(VENV) build *.egg-info
