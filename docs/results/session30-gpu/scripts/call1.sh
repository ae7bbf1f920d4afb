#!/usr/bin/env bash
# Session 30, call 1: A/B of segment reductions (A = HEAD c1e2f3d from its own folder, B = the
# working tree), the kernel profile of B's first plans, then the GPU verifier tests.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
(cd .device/c30/treeA && PYTHONPATH=$PWD timeout 150 python3 -m drtriton.cli bench ../p --policy builtin --mode strict \
  --device cuda --budget 20 --workers 4 --out $OUT/benchA > $OUT/benchA.log 2>&1; echo "bench A rc=$?" >> $OUT/gpu.log)
PYTHONPATH=$PWD timeout 150 python3 -m drtriton.cli bench .device/c30/p --policy builtin --mode strict \
  --device cuda --budget 20 --workers 4 --out $OUT/benchB > $OUT/benchB.log 2>&1
echo "bench B rc=$?" >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 100 python3 benchmarks/kernel_profile.py --mode strict --compile --calls 20 \
  .device/c30/p/*.py --out $OUT/profile > $OUT/profile.log 2>&1
echo "profile rc=$?" >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 150 python3 -m pytest -q -p no:cacheprovider -p no:xdist -o addopts="-ra" \
  tests/test_verifier_gpu.py tests/test_direct_launch.py -k "not attention and not corpus" > $OUT/gpu-tests.log 2>&1
echo "tests rc=$?" >> $OUT/gpu.log; tail -8 $OUT/gpu-tests.log >> $OUT/gpu.log
rm -rf $OUT/*/candidates $OUT/*/*.svg $OUT/profile/*.py
