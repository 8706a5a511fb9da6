# Thin wrapper over CMake. Every target first installs what is missing (scripts/deps.sh).
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
CMAKE_FLAGS ?=
# The Python package: a virtual environment under the build folder, and `pip install .` into it
# as a user runs it (pip's defaults: build isolation), with scikit-build-core keeping its CMake
# build in $(PY_BUILD), so reinstalls are incremental. That one tree also builds the C++ tests:
# `make test` builds the library once, the wheel's way, and tests that library from C++ and
# Python. ($(BUILD) itself is the plain CMake build for C++ work, the benchmarks and the C++ demos.)
VENV ?= $(BUILD)/venv
PY_BUILD ?= $(BUILD)/py
PYTHON ?= python3
PIP_INSTALL_TREE = --config-settings=build-dir=$(PY_BUILD) \
  --config-settings=cmake.define.TESSERA_BUILD_TESTS=ON \
  --config-settings=cmake.define.TESSERA_BUILD_EXAMPLES=ON

.PHONY: all deps build python fuzz demo demo-hosts demo-digits demo-cpp bench-train test test-long test-asan bench bench-dist bench-py bench-compile bench-llm docs clean

all: build

deps:
	@bash scripts/deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

$(VENV)/.ready: scripts/venv_requirements.txt | deps
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -r scripts/venv_requirements.txt
	touch $@

# scikit-build-core clears a build-dir's object files whenever pip's build environment is a new
# one (every run, under build isolation), because a build against one environment's nanobind would
# not fit another's; this build compiles against copies in the tree instead (CMakeLists.txt,
# tessera_stage_package), so the note that triggers the clearing is dropped before each run.
python: $(VENV)/.ready
	rm -f $(PY_BUILD)/.skbuild-info.json
	CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(VENV)/bin/pip install -q $(PIP_INSTALL_TREE) .

# The main job: a Llama-architecture language model trained data-parallel over 4 ranks started
# by `tessera launch`, on the Python standard library's sources (a BPE tokenizer trained on them,
# cached), with checkpoints mlx-lm loads, a loss-curve PNG and completions through mlx-lm
# (examples/python/llm, docs/training.md). A second `make demo` resumes an unfinished run and
# starts a new one after a finished run (the old folder is kept beside it).
DEMO_DIR ?= $(BUILD)/demo
DEMO_ARGS ?=
DEMO_TRAIN = examples/python/llm/train.py --run-dir $(DEMO_DIR)/run --cache-dir $(DEMO_DIR)/cache \
  --resume $(DEMO_ARGS)
demo: python
	$(VENV)/bin/tessera launch -n 4 $(DEMO_TRAIN)

# The same job on 2 simulated hosts (network namespaces, an sshd each; needs root) x 2 ranks.
demo-hosts: python
	$(PY_BUILD)/simhosts 2 -- $(VENV)/bin/tessera launch --hosts node0,node1 -n 2 \
	  $(DEMO_TRAIN)

# The first demo: an MLP trained data-parallel on scikit-learn's handwritten digits over 4 ranks
# (tessera.nn, SGD, nn.average_gradients).
demo-digits: python
	$(VENV)/bin/tessera launch -n 4 examples/python/data_parallel.py

# The C++ demos: the MLP in one process, then data-parallel over 4 ranks.
demo-cpp: build
	./$(BUILD)/train_mlp
	./$(BUILD)/tessera launch -n 4 ./$(BUILD)/data_parallel

# Every default test (long stress runs are labelled `long` and excluded here): ctest in the
# tree `pip install .` built, then pytest against the package installed in $(VENV) (its wheel
# test builds a wheel from the same tree: TESSERA_PIP_INSTALL_TREE; the test programs such as
# simhosts come from that tree too: TESSERA_TEST_PROGRAMS).
PYTEST = TESSERA_PIP_INSTALL_TREE="$(PIP_INSTALL_TREE)" TESSERA_TEST_PROGRAMS=$(abspath $(PY_BUILD)) \
  $(VENV)/bin/python -m pytest -q
test: python
	cd $(PY_BUILD) && ctest --output-on-failure -j $(JOBS) -LE long --timeout 900
	$(PYTEST) -m "not long" tests/python

# MLX_SRC: a checkout of github.com/ml-explore/mlx, whose C++ tests tools/mlx_cpp_tests.py builds
# against Tessera (skipped, saying so, without one: MLX publishes no source archive on PyPI).
MLX_SRC ?=
test-long: python
	cd $(PY_BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 3600
	$(PYTEST) tests/python
	$(MAKE) fuzz
	$(VENV)/bin/python tools/mlx_cpp_tests.py --skip-if-missing "$(MLX_SRC)" $(PY_BUILD)

test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DTESSERA_SANITIZE=ON \
	  -DTESSERA_BUILD_BENCHMARKS=OFF $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -LE long --timeout 1800

# libFuzzer over every parser of outside bytes (tests/fuzz): a clang build of the library with
# ASan, UBSan and coverage in $(FUZZ_BUILD), then FUZZ_RUNS inputs per target (scripts/fuzz.sh).
# `make test` replays the checked-in corpora in the normal build (ctest Fuzz.*).
FUZZ_BUILD ?= $(BUILD)/fuzz
FUZZ_RUNS ?= 1000000
fuzz: deps
	@bash scripts/fuzz_deps.sh
	cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
	  -DCMAKE_C_COMPILER=clang -DTESSERA_FUZZ=ON -DTESSERA_BUILD_TESTS=OFF \
	  -DTESSERA_BUILD_BENCHMARKS=OFF -DTESSERA_BUILD_EXAMPLES=OFF $(CMAKE_FLAGS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	bash scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_RUNS)

# CPU ops and matmul against NumPy and MLX, then the op tail (convolution) against PyTorch and MLX.
bench: build
	@bash scripts/bench_deps.sh $(BUILD)/bench-venv
	./$(BUILD)/bench_ops --peer-python $(BUILD)/bench-venv/bin/python --json $(BUILD)/bench_ops.json
	./$(BUILD)/bench_op_tail --peer-python $(BUILD)/bench-venv/bin/python \
	  --json $(BUILD)/bench_op_tail.json

# Collectives: Tessera's ring (TCP and shared memory) against Gloo, Open MPI (shared memory and
# TCP) and MLX's ring, 2 and 4 ranks, 4 B .. 256 MiB; interleaved rounds, medians.
bench-dist: build
	@bash scripts/bench_dist_deps.sh
	./$(BUILD)/bench_collectives --rounds 3 --json $(BUILD)/bench_collectives.json
	@# 2 simulated hosts x 2 ranks (network namespaces over veth, an sshd each; needs root)
	./$(BUILD)/bench_collectives --hosts 2 --ranks 4 --rounds 3 --max-bytes 67108864 \
	  --ops all_sum,all_gather --peers gloo,mpi --json $(BUILD)/bench_collectives_hosts.json

# Training steps against PyTorch (DDP over Gloo), JAX (jit) and MLX, at 1, 2 and 4 ranks.
bench-train:
	@bash scripts/bench_compile_deps.sh $(BUILD)/bench-venv $(BUILD)/py-bench
	$(BUILD)/bench-venv/bin/python benchmarks/python/bench_train.py

# The Python layer's per-call costs against MLX, NumPy and PyTorch (one shared benchmark venv).
bench-py: build
	@bash scripts/bench_py_deps.sh $(BUILD)/bench-venv $(BUILD)/py-bench
	$(BUILD)/bench-venv/bin/python benchmarks/python/bench_py.py

# compile's speed-up against MLX, PyTorch (torch.compile), JAX (jax.jit) and NumPy.
bench-compile: build
	@bash scripts/bench_compile_deps.sh $(BUILD)/bench-venv $(BUILD)/py-bench
	$(BUILD)/bench-venv/bin/python benchmarks/python/bench_compile.py

# The LLM path, four tables: prefill's products against the instruction's peak; LLM prefill and
# decode (mlx-lm on the package `make python` installs) against llama.cpp, PyTorch +
# transformers and MLX's CPU backend, on a 111 M and a ~1 B model from tools/make_llm.py (cached
# with their GGUF files in $(BUILD)/bench-llm); the fine-tuning step (mlx_lm.lora, LoRA and full)
# against PyTorch + PEFT; the fused kernels against their composites and PyTorch's fused ops.
bench-llm: python build
	@bash scripts/bench_llm_deps.sh $(BUILD)/bench-venv
	./$(BUILD)/bench_half_gemm
	$(VENV)/bin/python benchmarks/python/bench_llm.py --tessera-python $(VENV)/bin/python \
	  --peer-python $(BUILD)/bench-venv/bin/python --cache $(BUILD)/bench-llm
	$(VENV)/bin/python benchmarks/python/bench_finetune.py --tessera-python $(VENV)/bin/python \
	  --peer-python $(BUILD)/bench-venv/bin/python --cache $(BUILD)/bench-llm
	$(VENV)/bin/python benchmarks/python/bench_kernels.py --tessera-python $(VENV)/bin/python \
	  --peer-python $(BUILD)/bench-venv/bin/python

# Regenerate docs/env.md from the configuration registry.
docs: build
	./$(BUILD)/tessera env --markdown > docs/env.md

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
