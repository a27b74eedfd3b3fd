#!/usr/bin/env bash
# GPU validation in one call (issue 33): build _native with CUDA and cuBLASLt, run the cuda tests, the
# examples on cuda placements (2 ranks sharing one GPU: the IPC path), the GPU benchmark, and the
# whole suite with GLOBALTENSOR_CUDA_SIMULATE unset. Each phase has a time limit; its log goes to
# $OUT/<phase>.log (default gpu_logs/), and a summary line per phase is printed.
#
#     bash benchmarks/gpu_run.sh [phase ...]     # phases: env build cuda examples bench suite
#
# A+B runs phases A and B at once (correctness phases only: never time beside other work).
# GT_LIMIT_<phase>=seconds overrides a phase's limit.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_logs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" CUPY_CACHE_DIR=/tmp/gt_cupy_cache
unset GLOBALTENSOR_CUDA_SIMULATE
PY=${PYTHON:-python3}
PYTEST=("$PY" -m pytest -o addopts= -p no:cacheprovider -rs --durations=15 --timeout 300)
phases=("$@")
[ ${#phases[@]} -eq 0 ] && phases=(env build cuda examples bench suite)
summary=$(mktemp)

phase() {  # phase NAME LIMIT_SECONDS COMMAND...: the command's output to $OUT/NAME.log
  local name=$1 limit=$2 start=$SECONDS rc var="GT_LIMIT_$1"
  shift 2
  limit=${!var:-$limit}
  timeout -k 10 "$limit" "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  echo "$name: rc=$rc in $((SECONDS - start))s (limit ${limit}s)" >>"$summary"
  { echo "== $name rc=$rc"; tail -n 25 "$OUT/$name.log"; } >"$OUT/$name.tail"
}

env_info() {
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  "$PY" --version
  "$PY" -m pip list 2>/dev/null | grep -iE "^(cupy|nvidia-(nccl|cublas|cuda-runtime)|numpy|ml.dtypes|torch |pybind11|pytest|cloudpickle|tqdm)"
  nvcc --version | tail -1
  lscpu | grep "Model name"
}

examples() {
  local launch=("$PY" -m globaltensor.distributed.launch --nproc_per_node)
  for dev in cpu cuda; do
    for script in oneflow_tutorial_dp.py oneflow_tutorial_mp.py train.py; do
      echo "-- $script $dev"
      "${launch[@]}" 2 "examples/$script" "$dev" 2>&1 | grep -E "loss|Error|error" | tail -n 4
    done
    for layout in dp tp pp; do
      echo "-- gpt.py --layout $layout --device $dev"
      "${launch[@]}" 2 examples/gpt.py --layout "$layout" --steps 10 --device "$dev" 2>&1 | tail -n 4
    done
    echo "-- gpt.py --layout 2d --device $dev"
    "${launch[@]}" 4 examples/gpt.py --layout 2d --steps 10 --device "$dev" 2>&1 | tail -n 4
    echo "-- cnn.py --layout dp --device $dev"
    "${launch[@]}" 2 examples/cnn.py --layout dp --steps 10 --device "$dev" 2>&1 | tail -n 4
  done
  echo "-- tutorial 07"
  "$PY" tutorials/07_gpus.py 2>&1 | tail -n 8
}

export PY
export -f env_info examples

run_phase() {
  case $1 in
    env) phase env 60 bash -c env_info ;;
    build) phase build 300 env GLOBALTENSOR_BUILD_CUDA=1 "$PY" setup.py build_ext --inplace -j 16 ;;
    cuda) phase cuda 420 "${PYTEST[@]}" -v -m cuda tests ;;
    examples) phase examples 400 bash -c examples ;;
    bench) phase bench 300 "$PY" benchmarks/bench_cuda.py --json "$OUT/cuda.json" ;;
    suite) phase suite 560 "${PYTEST[@]}" -q -m "not cuda" -n 8 tests ;;
    *) echo "unknown phase $1" >>"$summary" ;;
  esac
}

for group in "${phases[@]}"; do
  IFS=+ read -r -a parts <<<"$group"
  for p in "${parts[@]}"; do run_phase "$p" & done
  wait
  for p in "${parts[@]}"; do cat "$OUT/$p.tail" 2>/dev/null; rm -f "$OUT/$p.tail"; done
done
cat "$summary"
