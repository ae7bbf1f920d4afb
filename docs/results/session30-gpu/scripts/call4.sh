#!/usr/bin/env bash
# Session 30, call 4: after the review, the segment problems again, then the GPU tests.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
PYTHONPATH=$PWD timeout 200 python3 -m drtriton.cli bench .device/c30/p --policy builtin --mode strict \
  --device cuda --budget 30 --workers 4 --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?" >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 200 python3 -m pytest -q -p no:cacheprovider -p no:xdist -o addopts="-ra" \
  tests/test_verifier_gpu.py tests/test_direct_launch.py -k "not attention and not corpus" > $OUT/gpu-tests.log 2>&1
echo "tests rc=$?" >> $OUT/gpu.log; tail -3 $OUT/gpu-tests.log >> $OUT/gpu.log
rm -rf $OUT/*/candidates $OUT/*/*.svg
