# Two commands do all the set-up on a fresh machine:
#   make demo       - installs what is needed and runs the main job
#   make test       - installs what is needed, runs the linter and the test suite (CI); the
#                     notebooks that fine-tune run under make test-notebooks, make demo's
#                     whole training run under make test-demo
#   make test-fast  - the tests that are neither slow nor run a peer library (a few minutes)
#   make test-peers - every test that asks bert4keras or transformers, each question asked
#                     live rather than replayed from tests/fixtures/peers/
#   make test-backends - every family and feature on JAX and PyTorch against TensorFlow
#   make lint       - the linter alone (ruff, configured in ruff.toml)
#   make docs       - the documentation site (MkDocs, mkdocs.yml) built from docs/ into site/
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export TF_CPP_MIN_LOG_LEVEL ?= 3

# The test files run on every core, each file's tests in one process (module fixtures are
# made once); tests/conftest.py starts the longest files first.
XDIST := -n logical --dist loadfile

.PHONY: demo test test-fast test-peers test-backends test-notebooks test-demo lint docs bench notebooks graphviz chromium clean

# tools/install_env.py installs with uv (several times faster than pip: 46 s against 115-200 s
# here for the 4.4 GB of packages) on the indexes pip is configured with, else with pip.
INSTALL := $(PY) tools/install_env.py -q

$(STAMP): setup.cfg constraints.txt tools/install_env.py
	$(PYTHON) -m venv $(VENV)
	$(INSTALL) --upgrade pip setuptools wheel
	$(INSTALL) -c constraints.txt -e '.[test]'
	# bert4keras pins keras<=2.3.1; it is only an oracle here and runs on tf-keras.
	$(INSTALL) --no-deps bert4keras==0.11.5
	# transformers 4.57's question-answering pipeline (removed in 5) is the span QA oracle; it
	# runs in a subprocess with this folder first on PYTHONPATH.
	$(INSTALL) --no-deps --upgrade --target .oracles/transformers4 \
	    'transformers==4.57.*' 'huggingface_hub>=0.34,<1.0' 'tokenizers>=0.22,<=0.23.0'
	touch $(STAMP)

# $(call system-package,COMMANDS,PACKAGE,MESSAGE): when none of COMMANDS is on PATH, installs
# the Debian PACKAGE with apt-get as root, or else prints MESSAGE (what to install, what waits).
system-package = $(foreach command,$(1),command -v $(command) >/dev/null 2>&1 ||) { \
  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
    (apt-get install -y -q $(2) >/dev/null 2>&1 || \
     (apt-get update -q >/dev/null && apt-get install -y -q $(2) >/dev/null)); \
  else \
    echo "$(3)"; \
  fi; }

graphviz:
	@$(call system-package,dot,graphviz,graphviz is missing: install it with 'sudo apt-get \
	  install graphviz' (Debian/Ubuntu) or 'brew install graphviz' (macOS); plots are skipped \
	  until then.)

# Headless Chromium renders every page of the site in tests/test_docs.py (a slow test, so
# make test needs it, make test-fast does not); under CI a missing one fails that test.
chromium:
	@$(call system-package,chromium chromium-browser,chromium,chromium is missing: install \
	  it with 'sudo apt-get install chromium' (Debian/Ubuntu); the test that renders the docs \
	  pages in a browser is skipped until then (fails under CI).)

RUN := runs/demo-$(shell date +%Y%m%d-%H%M%S)

# The main job: audit and draw Chinese BERT-base, then fine-tune the shipped kerasbert-zh-small
# on the shipped review split.
demo: $(STAMP) graphviz
	$(VENV)/bin/kerasbert audit checkpoints/chinese_L-12_H-768_A-12/bert_config.json --num-labels 2
	$(VENV)/bin/kerasbert plot checkpoints/chinese_L-12_H-768_A-12/bert_config.json \
	    --num-labels 2 --layers 2 -o out/chinese_base_2_layers.png
	$(VENV)/bin/kerasbert train --output $(RUN) --epochs 3

# The package's bytecode, written once (as pip writes an installed package's): where
# PYTHONDONTWRITEBYTECODE is set, each of the suite's hundreds of processes would compile
# the package again (half a second each).
COMPILE := $(PY) -m compileall -q -j 0 kerasbert kerasbert_cli.py

# What CI runs (.ci/run): the linter first, then every test, slow and peer ones included
# (the peers' answers replayed where recorded, one live question to each peer); the 60
# slowest are listed at the end, to keep the suite's time in view (docs/testing.md).
test: $(STAMP) graphviz chromium
	$(PY) -m ruff check .
	$(COMPILE)
	$(PY) -m pytest -q $(XDIST) -m "not training_notebook and not demo and not backends" \
	    --durations=60

# Every test that asks a peer (bert4keras 0.11.5, transformers 4.57), each question live.
test-peers: $(STAMP)
	$(COMPILE)
	KERASBERT_PEERS=live $(PY) -m pytest -q $(XDIST) -m peer

# Every family's outputs and every library feature on JAX and PyTorch, each against
# TensorFlow's (tests/test_backends.py; make test asks four families).
test-backends: $(STAMP) graphviz
	$(COMPILE)
	$(PY) -m pytest -q $(XDIST) -m backends

# The notebooks that fine-tune, top to bottom (about 15 minutes on 2 cores without AVX-512).
test-notebooks: $(STAMP) graphviz
	$(PY) -m pytest -q -m training_notebook

# make demo's training run, whole, then its model on plain sentences (tests/test_demo.py; about
# ten minutes on 2 cores with AVX-512).
test-demo: $(STAMP)
	$(PY) -m pytest -q -m demo

# Leaves out the tests marked slow (full-size models, training runs, real processes) or
# peer (bert4keras, transformers, ONNX Runtime, LiteRT as oracles); see setup.cfg.
test-fast: $(STAMP) graphviz
	$(COMPILE)
	$(PY) -m pytest -q $(XDIST) -m "not slow and not peer and not training_notebook and not demo and not backends"

lint: $(STAMP)
	$(PY) -m ruff check .

# The site from docs/, strict: a broken link, a missing anchor or a page left out of the nav fails
# (tests/test_docs.py runs the same build).
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict

# Executed copies of the notebooks, with their outputs, in out/notebooks/.
notebooks: $(STAMP) graphviz
	$(PY) notebooks/run.py --output out/notebooks

# The peers the benchmarks compare with (keras-hub, onnxruntime) are only needed here.
bench: $(STAMP)
	$(PY) -m pip install -q -c constraints.txt -e '.[test,bench]'
	$(PY) -m bench

clean:
	rm -rf $(VENV) .oracles out build site *.egg-info
