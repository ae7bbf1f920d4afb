#!/usr/bin/env bash
# Session 27, call 2: the GPU tests (NaN kept by relu, clamp, maximum and max pooling among them),
# then the ModuleInfo and OpInfo problems call 1 did not reach (and LPPool1d again), strict.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
PYTHONPATH=$PWD timeout 320 python3 -m pytest -q -p no:cacheprovider -p no:xdist -o addopts="-ra" \
  tests/test_verifier_gpu.py tests/test_direct_launch.py tests/test_cuda_graph.py > $OUT/gpu-tests.log 2>&1
echo "tests rc=$?" >> $OUT/gpu.log; tail -12 $OUT/gpu-tests.log >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 230 python3 -m drtriton.cli bench .device/c27/probs2 --policy builtin --mode strict \
  --device cuda --budget 15 --workers 8 --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?" >> $OUT/gpu.log
rm -rf $OUT/*/candidates $OUT/*/*.svg
