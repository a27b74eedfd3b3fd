#!/usr/bin/env bash
# GPU validation in one call of the device tool (issue 33): build _native with CUDA and cuBLASLt,
# time the step's host and GPU shares (profile_cuda_step.py) and the GPU benchmark (bench_cuda.py)
# alone, then run the cuda tests beside the whole suite with GLOBALTENSOR_CUDA_SIMULATE unset. The
# default phases fit one call of at most 600 s (a session has 15 minutes of device time, start
# included); each phase has a time limit, its log goes to $OUT/<phase>.log (default gpu_logs/),
# and a summary line per phase is printed. Wheels in .whl/ (pyzmq, cryptography: the parameter
# server's tests; the GPU image lacks them; name .whl in the device run's carry) are installed first, under
# /tmp/gt_site.
#
#     bash benchmarks/gpu_run.sh [phase ...]     # phases: env build profile bench cuda suite examples
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
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/gt_site .whl/*.whl \
    && export PYTHONPATH="$PYTHONPATH:/tmp/gt_site"
fi
PYTEST=("$PY" -m pytest -o addopts= -p no:cacheprovider -rs --durations=15 --timeout 300)
phases=("$@")
[ ${#phases[@]} -eq 0 ] && phases=(env build profile bench cuda+suite)
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
    env) phase env 30 bash -c env_info ;;
    build) phase build 120 env GLOBALTENSOR_BUILD_CUDA=1 "$PY" setup.py build_ext --inplace -j 16 ;;
    profile) phase profile 60 "$PY" benchmarks/profile_cuda_step.py --json "$OUT/cuda_step.json" ;;
    bench) phase bench 180 "$PY" benchmarks/bench_cuda.py --json "$OUT/cuda.json" ;;
    cuda) phase cuda 200 "${PYTEST[@]}" -v -m cuda tests ;;
    suite) phase suite 200 "${PYTEST[@]}" -q -m "not cuda" -n 10 tests ;;
    examples) phase examples 400 bash -c examples ;;
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
