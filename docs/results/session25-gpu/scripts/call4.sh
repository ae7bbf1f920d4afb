#!/usr/bin/env bash
# Session 25, call 4: the GPU tests on this tree (DirectLaunch's signature changed), then the
# outside set's decoders and two others in one bench, as session 24's call J ran them (strict,
# budget 30 s, 5 workers). Run from the repository root with the problems under .device/c25/probs.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
PYTHONPATH=$PWD timeout 230 python3 -m pytest -q -p no:cacheprovider -p no:xdist -o addopts="-ra" tests/test_verifier_gpu.py tests/test_direct_launch.py tests/test_cuda_graph.py > $OUT/gpu-tests.log 2>&1
echo "tests rc=$?" >> $OUT/gpu.log; tail -3 $OUT/gpu-tests.log >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 330 python3 -m drtriton.cli bench .device/c25/probs --policy builtin --mode strict --device cuda --budget 30 --workers 5 --out $OUT/outside >> $OUT/gpu.log 2>&1
echo "bench rc=$?" >> $OUT/gpu.log
rm -rf $OUT/*/candidates $OUT/*/*.svg
