# Two entry points for a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
FASHION_MNIST := /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz

.PHONY: demo test lint bench data clean fuzz

$(STAMP): setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

$(FASHION_MNIST):
	@if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	$$SUDO apt-get update -q && $$SUDO apt-get install -y -q dataset-fashion-mnist

data: $(FASHION_MNIST)

demo: $(STAMP) $(FASHION_MNIST)
	rm -rf runs/demo
	$(BIN)/p2pfl run configs/demo.toml --out runs/demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/pytest

# `make bench` runs the whole suite; `make bench BENCH="--quick"` (or --only, --device ...).
bench: $(STAMP) $(FASHION_MNIST)
	$(BIN)/python -m p2pfl.cli bench $(BENCH)

clean:
	rm -rf $(VENV) runs *.egg-info

# Optional: FedAvg in Flower's simulation engine beside p2pfl (bench/peer_flower.py), in its own
# venv so that flwr and ray stay out of .venv. Options: make bench-flower FLOWER_ARGS="--rounds 5".
FLOWER_VENV := .venv-flower
FLOWER_STAMP := $(FLOWER_VENV)/.installed
FLOWER_ARGS ?=

.PHONY: bench-flower clean-flower

$(FLOWER_STAMP): setup.cfg pyproject.toml
	test -x $(FLOWER_VENV)/bin/python || $(PY) -m venv $(FLOWER_VENV)
	$(FLOWER_VENV)/bin/pip install -q --upgrade pip
	$(FLOWER_VENV)/bin/pip install -q torch==2.13.0
	$(FLOWER_VENV)/bin/pip install -q -e '.[flower]'
	touch $(FLOWER_STAMP)

bench-flower: $(FLOWER_STAMP) $(FASHION_MNIST)
	$(FLOWER_VENV)/bin/python -m bench.peer_flower $(FLOWER_ARGS)

clean: clean-flower
clean-flower:
	rm -rf $(FLOWER_VENV)

# The fuzz and fault suites with long budgets (docs/reliability.md): 4x the config and CLI
# mutations, 10x the property examples, 7x the [study] tables, 20 SIGKILLs of a study; prints
# the counts at the end.
fuzz: $(STAMP)
	P2PFL_FUZZ=1 $(BIN)/pytest tests/test_fuzz_cli.py tests/test_bad_configs.py \
		tests/test_mixing_properties.py tests/test_bad_objects.py tests/test_study_kills.py \
		tests/test_study_fuzz.py
