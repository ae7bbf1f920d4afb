#!/usr/bin/env bash
# Session 24, call J: the GPU tests on this tree (the cached-results check now times a suspicious
# round again), then call H's set again (DeBERTa-v2 left out: PyTorch's own forward faults) in one
# bench, as call H ran it: CLIP vision was rejected there. Run from the repository root.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
PYTHONPATH=$PWD timeout 230 python3 -m pytest -q -p no:cacheprovider -p no:xdist -o addopts="-ra" tests/test_verifier_gpu.py tests/test_direct_launch.py tests/test_cuda_graph.py > $OUT/gpu-tests.log 2>&1
echo "tests rc=$?" >> $OUT/gpu.log; tail -3 $OUT/gpu-tests.log >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 330 python3 -m drtriton.cli bench .device/c24/probs --policy builtin --mode strict --device cuda --budget 30 --workers 5 --out $OUT/outside >> $OUT/gpu.log 2>&1
echo "bench rc=$?" >> $OUT/gpu.log
rm -rf $OUT/*/candidates $OUT/*/*.svg
