#!/usr/bin/env bash
# Session 27, call 1: PyTorch's ModuleInfo layers (111 problems) and 8 OpInfo-derived problems of
# this session converted strict, verified and timed on the GPU; then the GPU tests.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 340 python3 -m drtriton.cli bench .device/c27/probs --policy builtin --mode strict \
  --device cuda --budget 20 --workers 6 --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?" >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 230 python3 -m pytest -q -p no:cacheprovider -p no:xdist -o addopts="-ra" \
  tests/test_verifier_gpu.py tests/test_direct_launch.py tests/test_cuda_graph.py > $OUT/gpu-tests.log 2>&1
echo "tests rc=$?" >> $OUT/gpu.log; tail -8 $OUT/gpu-tests.log >> $OUT/gpu.log
rm -rf $OUT/*/candidates $OUT/*/*.svg
