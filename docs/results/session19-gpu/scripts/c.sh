#!/usr/bin/env bash
# Call C: DirectLaunch after the fix (driver started inside the launch). Decomposition; pointwise bench; overhead; GPU tests.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
PYTHONPATH=$PWD timeout 90 python3 .device/c19/decompose.py > $OUT/decompose.log 2>&1
cp -r benchmarks/pointwise /tmp/pointwise
PYTHONPATH=$PWD timeout 200 python3 -m drtriton.cli bench /tmp/pointwise --policy builtin --mode strict --device cuda --budget 20 --workers 4 --out $OUT/pw_after >> $OUT/gpu.log 2>&1
rm -rf $OUT/pw_after/candidates $OUT/pw_after/*.svg $OUT/pw_after/summary.json
PYTHONPATH=$PWD timeout 200 python3 -m pytest -q -x tests/test_verifier_gpu.py tests/test_direct_launch.py tests/test_cuda_graph.py >> $OUT/gpu.log 2>&1
