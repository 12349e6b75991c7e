# Two commands do all the set-up on a fresh machine:
#   make demo   - installs what is needed and runs the main job
#   make test   - installs what is needed and runs the test suite
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export TF_CPP_MIN_LOG_LEVEL ?= 3

.PHONY: demo test bench notebooks graphviz clean

$(STAMP): setup.cfg constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q -c constraints.txt -e '.[test]'
	# bert4keras pins keras<=2.3.1; it is only an oracle here and runs on tf-keras.
	$(PY) -m pip install -q --no-deps bert4keras==0.11.5
	touch $(STAMP)

graphviz:
	@command -v dot >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get install -y -q graphviz >/dev/null 2>&1 || \
	     (apt-get update -q >/dev/null && apt-get install -y -q graphviz >/dev/null)); \
	  else \
	    echo "graphviz is missing: install it with 'sudo apt-get install graphviz' (Debian/Ubuntu)" \
	         "or 'brew install graphviz' (macOS); plots are skipped until then."; \
	  fi; }

RUN := runs/demo-$(shell date +%Y%m%d-%H%M%S)

# The main job: audit and draw Chinese BERT-base, then fine-tune the shipped kerasbert-zh-small
# on the shipped review split.
demo: $(STAMP) graphviz
	$(VENV)/bin/kerasbert audit checkpoints/chinese_L-12_H-768_A-12/bert_config.json --num-labels 2
	$(VENV)/bin/kerasbert plot checkpoints/chinese_L-12_H-768_A-12/bert_config.json \
	    --num-labels 2 --layers 2 -o out/chinese_base_2_layers.png
	$(VENV)/bin/kerasbert train --output $(RUN) --epochs 3

test: $(STAMP) graphviz
	$(PY) -m pytest -q

# Executed copies of the notebooks, with their outputs, in out/notebooks/.
notebooks: $(STAMP) graphviz
	$(PY) notebooks/run.py --output out/notebooks

# The peers the benchmarks compare with (keras-hub, onnxruntime) are only needed here.
bench: $(STAMP)
	$(PY) -m pip install -q -c constraints.txt -e '.[test,bench]'
	$(PY) -m bench

clean:
	rm -rf $(VENV) out build *.egg-info
