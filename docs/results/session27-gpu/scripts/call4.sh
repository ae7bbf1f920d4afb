#!/usr/bin/env bash
# Session 27, call 4: the NaN tests again with max/min reductions (amax, amin) among them.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
PYTHONPATH=$PWD timeout 150 python3 -m pytest -q -p no:cacheprovider -p no:xdist -o addopts="-ra" \
  "tests/test_verifier_gpu.py::test_max_and_min_bounds_keep_nan_on_the_gpu" > $OUT/gpu-tests.log 2>&1
echo "tests rc=$?" >> $OUT/gpu.log; tail -4 $OUT/gpu-tests.log >> $OUT/gpu.log
