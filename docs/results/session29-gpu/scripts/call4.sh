#!/usr/bin/env bash
# Session 29, call 4: the GPU verifier and direct-launch tests, whole (call 2 ran out of time).
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
PYTHONPATH=$PWD timeout 520 python3 -m pytest -q -p no:cacheprovider -p no:xdist -o addopts="-ra" \
  tests/test_verifier_gpu.py tests/test_direct_launch.py -k "not attention and not corpus" > $OUT/gpu-tests.log 2>&1
echo "tests rc=$?" >> $OUT/gpu.log; tail -8 $OUT/gpu-tests.log >> $OUT/gpu.log
