# Entry points. `make lab` runs the whole lab on the local cluster; `make test`
# runs every test. Both set everything up on first use.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV := $(CURDIR)/.venv
COLLECTION_LINK := .collections/ansible_collections/gpushare/k8s
export PATH := $(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
# Keep Ansible's own temp/cache inside the user's home, not the checkout.
export ANSIBLE_HOME ?= $(HOME)/.ansible

PLAYBOOK := ansible-playbook
PYTEST := $(VENV)/bin/python -m pytest

.PHONY: help setup venv link cluster cluster-down lab dra cluster-operator cluster-operator-down lab-operator test unit integration molecule sanity lint build clean tables helm nvidia matrix

help:
	@echo "make lab           set up, build the control plane if needed, start the local cluster, run the lab"
	@echo "make test          the tests: unit, integration and molecule on the live cluster, ansible-lint (make matrix: sanity on every ansible-core)"
	@echo "make matrix        the ansible-core matrix (noxfile.py): unit tests, sanity and a live gpu_sharing run on each ansible-core claimed, then a table"
	@echo "make cluster       start (or reuse) the local lab cluster"
	@echo "make cluster-down  remove the local lab cluster"
	@echo "make dra           the same lab on Dynamic Resource Allocation (its own nodes on the lab cluster)"
	@echo "make lab-operator  the whole lab in operator mode on cluster gpushare-operator (GPU Operator stand-in)"
	@echo "make build         build the collection tarball"
	@echo "make lock          recompile requirements-lock.txt from requirements.txt, and the matrix cells' locks (LOCK_EXCLUDE_NEWER=<date> to move on)"
	@echo "make tables        regenerate NVIDIA's hardware tables (plugins/module_utils/hardware/tables.py): go-nvml's mock merged with the documented MIG geometry"
	@echo "make helm          build (once; cached after) the helm that tools/helm/go.mod pins and print its path"
	@echo "make nvidia        build (once; cached after) NVIDIA's gpu-feature-discovery, device plugin, config-manager (tools/nvidia) and mig-parted (tools/mig-parted), our mock NVML (tools/nvml-mock); print their paths"
	@echo "make clusterpolicy-crd  generate (once; cached after) the ClusterPolicy CRD from NVIDIA's gpu-operator Go types with controller-gen (tools/clusterpolicy-crd); print its path"

setup: venv link

venv: $(VENV)/.installed
$(VENV)/.installed: requirements-lock.txt
	@echo "[setup] creating $(VENV) from requirements-lock.txt (every package pinned, with hashes)"
	@test -x $(VENV)/bin/python || python3 -m venv $(VENV)
	@$(VENV)/bin/pip install --quiet --disable-pip-version-check --require-hashes -r requirements-lock.txt
	@touch $@

# The locks: requirements.txt (the top-level toolchain) and tests/sanity/requirements.in compiled by uv, every package
# pinned with its hashes, for Python 3.11 and later (--universal). Only what the registry had published before
# LOCK_EXCLUDE_NEWER is taken, so `make lock` writes the committed files again byte for byte while the registry's
# history stands (`make lock-check` checks it);
# to move to newer releases: make lock LOCK_EXCLUDE_NEWER=$(date -u +%Y-%m-%dT%H:%M:%SZ), then `make test` and
# `make matrix`. Each other cell of the ansible-core matrix (tests/matrix/core-*/) gets the same two locks: the toolchain
# with that cell's ansible and ansible-core (its overrides.txt) for that cell's Python (its python-version), and
# sanity's, up to the same date.
LOCK_EXCLUDE_NEWER := $(shell sed -n 's/.*--exclude-newer \([^ ]*\).*/\1/p' requirements-lock.txt | head -n 1)
# (no Python is downloaded for a cell's version: the resolution needs none)
UV_COMPILE = UV_PYTHON_DOWNLOADS=never $(VENV)/bin/uv pip compile --quiet --universal --python-version $(1) --generate-hashes --exclude-newer $(LOCK_EXCLUDE_NEWER)
MATRIX_CELLS := $(patsubst %/,%,$(sort $(dir $(wildcard tests/matrix/core-*/overrides.txt))))
.PHONY: lock
lock: venv
	cd $(CURDIR) && $(call UV_COMPILE,3.11) requirements.txt -o requirements-lock.txt
	cd $(CURDIR)/tests/sanity && $(call UV_COMPILE,3.11) requirements.in -c ../../requirements-lock.txt -o requirements-lock.txt
	@set -e; for cell in $(MATRIX_CELLS); do \
	  python=$$(cat $$cell/python-version); echo "[lock] $$cell (Python $$python)"; \
	  (cd $(CURDIR)/$$cell && $(call UV_COMPILE,$$python) ../../../requirements.txt --override overrides.txt -o requirements-lock.txt && \
	   $(call UV_COMPILE,$$python) ../../sanity/requirements.in -c requirements-lock.txt -o sanity-lock.txt); \
	done

# Whether `make lock` would write the committed locks again, against the registry as it is now (tests/unit/test_lock.py's
# registry-marked test; `make test` leaves it out).
.PHONY: lock-check
lock-check: venv link
	$(PYTEST) -m registry tests/unit/test_lock.py

# The checkout is the collection; FQCNs resolve through this link.
link: $(COLLECTION_LINK)
$(COLLECTION_LINK):
	@mkdir -p $(dir $@)
	@ln -sfn ../../.. $@

cluster: setup
	$(PLAYBOOK) playbooks/cluster.yml

cluster-down: setup
	$(PLAYBOOK) playbooks/cluster.yml -e lab_cluster_state=absent

lab: cluster
	@if [ -f playbooks/lab.yml ]; then $(PLAYBOOK) playbooks/lab.yml; else echo "[lab] playbooks/lab.yml does not exist yet"; fi

# The DRA track on the lab cluster: the DRA nodes (created by `make cluster`), their ResourceSlices,
# DeviceClasses, workloads, quota and report. Runs beside `make lab`, before or after it.
dra: cluster
	$(PLAYBOOK) playbooks/dra.yml

# Operator mode on the lab cluster: its own cluster, with the GPU Operator stand-in as a component,
# and its own lab root, so `make lab`'s cluster and files are never touched. Creating it builds (once, cached in
# ~/.cache/gpushare, progress lines while a cold build runs) NVIDIA's gpu-feature-discovery and our mock NVML, which
# label its GPU nodes (docs/nvidia-gfd.md); `make lab` needs neither.
OPERATOR_CLUSTER := gpushare-operator
OPERATOR_VARS := -e gpushare_cluster_name=$(OPERATOR_CLUSTER) -e gpushare_gpu_operator_standin=true

cluster-operator: setup
	$(PLAYBOOK) playbooks/cluster.yml $(OPERATOR_VARS)

cluster-operator-down: setup
	$(PLAYBOOK) playbooks/cluster.yml $(OPERATOR_VARS) -e lab_cluster_state=absent

lab-operator: cluster-operator
	$(PLAYBOOK) playbooks/lab.yml $(OPERATOR_VARS) -e gpushare_mode=operator -e gpushare_lab_root=$(HOME)/gpushare-operator

unit: setup
	$(PYTEST) tests/unit

# The live tests in LIVE_WORKERS pytest-xdist workers, one scope each at a time (see `test` below).
LIVE_WORKERS ?= 3
LIVE_PYTEST := $(PYTEST) -n $(LIVE_WORKERS) --dist loadscope --no-loadscope-reorder
integration: cluster
	$(LIVE_PYTEST) tests/integration

molecule: cluster
	molecule test

sanity: setup
	tests/sanity/run.sh

lint: setup
	ansible-lint --profile production

# The unit tests (two workers) while molecule's own cluster (gpushare-molecule) starts (after `molecule reset`: a state
# left by an interrupted run says "created" even when that cluster is gone, and molecule would skip creating it); then the live-cluster tests
# with the molecule scenario beside them. ansible-lint starts with the unit tests, at the lowest priority: it takes what
# the other steps leave idle (the unit phase leaves about a third of its CPU time idle while tests wait on timeouts; at
# normal priority, or with a fourth worker, every module ran slower). ansible-test sanity is `make matrix`'s, which runs
# it on every ansible-core claimed, this toolchain's included (CI runs both targets; `make sanity` runs it alone): in
# this target it ran the same check a second time, about 90 CPU-s of a run bound by two cores.
# The live tests run in LIVE_WORKERS pytest-xdist workers, one scope each at a time, the longest first (conftest.py
# scope_of, SCOPE_ORDER): each module with a cluster of its own (and ports of its own) beside the modules that share
# the lab cluster, which run one at a time. Each log is shown once its step has ended; any step failing fails the
# target.
OUTPUT := $(CURDIR)/tests/output
MOLECULE_LOG := $(OUTPUT)/molecule.log
LIVE_LOG := $(OUTPUT)/live-tests.log
test: cluster helm nvidia clusterpolicy-crd
	@mkdir -p $(OUTPUT)
	@echo "[test] the unit tests while molecule's cluster starts, ansible-lint beside them; their output: $(OUTPUT)/{molecule,lint}.log"; \
	  nice -n 19 $(MAKE) --no-print-directory lint > $(OUTPUT)/lint.log 2>&1 & lint=$$!; \
	  { molecule reset && molecule create; } > $(MOLECULE_LOG) 2>&1 & create=$$!; \
	  $(PYTEST) -n 2 tests/unit; unit_rc=$$?; \
	  wait $$create; create_rc=$$?; \
	  echo "[test] unit tests exit $$unit_rc, molecule create exit $$create_rc"; \
	  test $$create_rc -eq 0 || cat $(MOLECULE_LOG); \
	  if test $$unit_rc -ne 0 || test $$create_rc -ne 0; then kill $$lint 2>/dev/null; wait; exit 1; fi; \
	  echo "[test] the live tests, with molecule beside them (and ansible-lint while it lasts)"; \
	  molecule test >> $(MOLECULE_LOG) 2>&1 & molecule=$$!; \
	  $(LIVE_PYTEST) --durations=15 tests/integration 2>&1 | tee $(LIVE_LOG); \
	  pytest_rc=$${PIPESTATUS[0]}; \
	  wait $$lint; lint_rc=$$?; wait $$molecule; molecule_rc=$$?; \
	  cat $(OUTPUT)/lint.log $(MOLECULE_LOG); \
	  echo "[test] the live tests' summary (all of it above and in $(LIVE_LOG)):"; \
	  sed -n '/slowest .*durations/,$$p' $(LIVE_LOG) | cut -c1-400; \
	  echo "[test] live tests exit $$pytest_rc, molecule exit $$molecule_rc, lint exit $$lint_rc"; \
	  test $$pytest_rc -eq 0 && test $$molecule_rc -eq 0 && test $$lint_rc -eq 0

# The ansible-core matrix (noxfile.py): on every ansible-core meta/runtime.yml claims (the default's .venv and each
# tests/matrix/core-*/ cell's own venv, from its lock), the unit tests, ansible-test sanity and a live configure /
# re-run (changed=0) / undo of gpushare.k8s.gpu_sharing on an operator-mode cluster of its own, with that cell's Ansible;
# then the table (core x Python x kubernetes.core x result), also in tests/output/matrix/table.txt. `make test` is the
# full suite on the default core. The cluster target builds the control plane on a cold cache.
matrix: cluster
	@rm -rf $(OUTPUT)/matrix
	$(VENV)/bin/nox --noxfile $(CURDIR)/noxfile.py --sessions matrix

# NVIDIA's hardware tables: tools/gpu-tables (its go.mod pins go-nvml) built into the user's cache, then run; it writes
# go-nvml's mock as JSON, which tools/gpu-tables/merge.py merges with the documented MIG geometry (mig-geometry.yaml,
# the documentation winning) into the module, printing every disagreement.
# tests/integration/test_gpu_tables.py regenerates the file the same way and compares it byte for byte.
GPU_TABLES := plugins/module_utils/hardware/tables.py
tables: venv
	@set -o pipefail; bin=$$(tools/gpu-tables/build.sh) && "$$bin" | $(VENV)/bin/python tools/gpu-tables/merge.py -o $(GPU_TABLES) && \
	  echo "[tables] wrote $(GPU_TABLES) with $$bin and tools/gpu-tables/merge.py"

# Helm as tools/helm/go.mod pins it, built into the user's cache on first use (minutes), for the tests that install
# charts (tests/integration/helm_tool.py); prints the binary's path.
helm:
	@tools/helm/build.sh

# NVIDIA's unmodified gpu-feature-discovery, nvidia-device-plugin and config-manager (k8s-device-plugin as
# tools/nvidia/go.mod pins it) and nvidia-mig-parted (tools/mig-parted/go.mod), our mock libnvidia-ml.so.1
# (tools/nvml-mock) and the kubelet side of the device-plugin API (tools/device-plugin-kubelet), built into the
# user's cache on first use (NVIDIA's: a few minutes; the mock: a second), for tests/integration/test_nvidia_gfd.py,
# test_nvidia_device_plugin.py and test_nvidia_mig_parted.py (docs/nvidia-gfd.md); prints the binaries and the library.
nvidia:
	@nvidia=$$(tools/nvidia/build.sh) && migparted=$$(tools/mig-parted/build.sh) && mock=$$(tools/nvml-mock/build.sh) && \
	  kubelet=$$(tools/device-plugin-kubelet/build.sh) && \
	  echo "$$nvidia/gpu-feature-discovery" && echo "$$nvidia/nvidia-device-plugin" && echo "$$nvidia/config-manager" && \
	  echo "$$migparted/nvidia-mig-parted" && echo "$$kubelet" && echo "$$mock/libnvidia-ml.so.1"

# The GPU Operator's ClusterPolicy CRD generated by controller-gen (tools/clusterpolicy-crd/go.mod pins controller-tools)
# from gpu-operator's public api/nvidia/v1 types (tools/clusterpolicy-crd/types/go.mod pins the module) into the user's
# cache (cold: about two minutes for controller-gen, seconds for the CRD), for tests/integration/test_clusterpolicy_crd.py
# (docs/clusterpolicy-crd.md); prints the CRD file's path.
.PHONY: clusterpolicy-crd
clusterpolicy-crd:
	@tools/clusterpolicy-crd/build.sh

# The tarball's README.md is docs/collection/README.md (for someone who installed it), not this checkout's.
build: setup
	tools/build-collection.sh $(CURDIR)

clean:
	rm -rf .collections .pytest_cache tests/output gpushare-k8s-*.tar.gz

# Benchmarks (BENCHMARKS.md): every figure and ratio of one run; about 25 minutes.
# Options go in BENCH_ARGS, e.g. `make bench BENCH_ARGS="--quick"` or "--only check,scale".
bench: cluster
	$(VENV)/bin/python benchmarks/run.py $(BENCH_ARGS)
