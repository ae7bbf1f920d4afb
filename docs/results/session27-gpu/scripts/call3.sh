#!/usr/bin/env bash
# Session 27, call 3: the NaN tests and the GPU test files call 2 did not reach, then the
# ModuleInfo/OpInfo problems neither call reached.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
PYTHONPATH=$PWD timeout 210 python3 -m pytest -q -p no:cacheprovider -p no:xdist -o addopts="-ra" \
  "tests/test_verifier_gpu.py::test_max_and_min_bounds_keep_nan_on_the_gpu" tests/test_direct_launch.py \
  tests/test_cuda_graph.py > $OUT/gpu-tests.log 2>&1
echo "tests rc=$?" >> $OUT/gpu.log; tail -12 $OUT/gpu-tests.log >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 190 python3 -m drtriton.cli bench .device/c27/probs3 --policy builtin --mode strict \
  --device cuda --budget 15 --workers 8 --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?" >> $OUT/gpu.log
rm -rf $OUT/*/candidates $OUT/*/*.svg
