#!/usr/bin/env bash
# Session 24, call H: transformers architectures outside the corpus (small configs made larger:
# 4 layers, hidden 512, 8 x 256 tokens; images 8 x 224 x 224), strict, through the verifier
# beside eager and torch.compile; then the GPU tests. Run from the repository root: bash .device/c24/h.sh
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
python3 -c "import torch, triton, transformers; print(torch.__version__, triton.__version__, transformers.__version__)" >> $OUT/gpu.log
git log --oneline -1 >> $OUT/gpu.log 2>&1 || true
PYTHONPATH=$PWD timeout 330 python3 -m drtriton.cli bench .device/c24/probs --policy builtin --mode strict --device cuda --budget 30 --workers 5 --out $OUT/outside >> $OUT/gpu.log 2>&1
echo "bench rc=$?" >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 200 python3 -m pytest -q -p no:cacheprovider -p no:xdist -o addopts="-ra" tests/test_verifier_gpu.py tests/test_direct_launch.py tests/test_cuda_graph.py > $OUT/gpu-tests.log 2>&1
echo "tests rc=$?" >> $OUT/gpu.log
tail -3 $OUT/gpu-tests.log >> $OUT/gpu.log
rm -rf $OUT/outside/candidates $OUT/outside/*.svg
