# Two commands on a fresh machine: `make app` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: app test venv bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

# The demo's MiniLM embeddings are computed once here (about 20 s, then read from the
# on-disk cache in well under a second) so that the dashboard's first chart is immediate.
app: $(STAMP)
	$(VENV)/bin/slarouter embed --data data/demo.parquet
	$(VENV)/bin/streamlit run app.py

# Two pytest workers (pytest-xdist): the browser, service and subprocess tests wait on I/O
# much of their time, so two workers on 2 cores take about two thirds of one's time.
test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -n 2

bench: $(STAMP)
	$(PY) benchmarks/bench_core.py

clean:
	rm -rf $(VENV) .pytest_cache
