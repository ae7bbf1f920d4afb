#!/usr/bin/env bash
# Session 26, call 2: the GPU tests (attention converted and verified on the GPU among them), then
# drtriton bench on benchmarks/attention (strict, verified, timed beside eager and torch.compile).
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
PYTHONPATH=$PWD timeout 300 python3 -m pytest -q -p no:cacheprovider -p no:xdist -o addopts="-ra" \
  tests/test_verifier_gpu.py tests/test_direct_launch.py tests/test_cuda_graph.py > $OUT/gpu-tests.log 2>&1
echo "tests rc=$?" >> $OUT/gpu.log; tail -8 $OUT/gpu-tests.log >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 250 python3 -m drtriton.cli bench benchmarks/attention --policy builtin --mode strict \
  --device cuda --budget 60 --workers 3 --out $OUT/bench-attention >> $OUT/gpu.log 2>&1
echo "bench rc=$?" >> $OUT/gpu.log
rm -rf $OUT/*/candidates $OUT/*/*.svg
