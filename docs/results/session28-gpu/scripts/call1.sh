#!/usr/bin/env bash
# Session 28, call 1: this session's conversions on the GPU (masked updates, take_along_dim,
# adaptive_max_pool3d, norms without a bias, ModuleInfo's last samples), then the NaN GPU tests.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 330 python3 -m drtriton.cli bench .device/c28/problems --policy builtin --mode strict \
  --device cuda --budget 20 --workers 8 --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?" >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 200 python3 -m pytest -q -p no:cacheprovider -p no:xdist -o addopts="-ra" \
  tests/test_verifier_gpu.py -k "nan" > $OUT/gpu-tests.log 2>&1
echo "tests rc=$?" >> $OUT/gpu.log; tail -8 $OUT/gpu-tests.log >> $OUT/gpu.log
rm -rf $OUT/*/candidates $OUT/*/*.svg
