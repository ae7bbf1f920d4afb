#!/usr/bin/env bash
# Session 29, call 2: A/B of the compaction and scan changes (A = HEAD 6510fc3 from its own folder,
# B = the working tree), the kernel profile of B's first plans, then the GPU verifier tests.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
(cd .device/c29/treeA && PYTHONPATH=$PWD timeout 170 python3 -m drtriton.cli bench ../p2 --policy builtin --mode strict \
  --device cuda --budget 20 --workers 8 --out $OUT/benchA > $OUT/benchA.log 2>&1; echo "bench A rc=$?" >> $OUT/gpu.log)
PYTHONPATH=$PWD timeout 170 python3 -m drtriton.cli bench .device/c29/p2 --policy builtin --mode strict \
  --device cuda --budget 20 --workers 8 --out $OUT/benchB > $OUT/benchB.log 2>&1
echo "bench B rc=$?" >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 90 python3 benchmarks/kernel_profile.py --mode strict --calls 20 \
  .device/c29/p2/masked_select.py .device/c29/p2/nonzero.py .device/c29/p2/adaptive_max_pool3d.py .device/c29/p2/cumsum_flat.py \
  --out $OUT/profile > $OUT/profile.log 2>&1
echo "profile rc=$?" >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 150 python3 -m pytest -q -p no:cacheprovider -p no:xdist -o addopts="-ra" \
  tests/test_verifier_gpu.py tests/test_direct_launch.py -k "not attention and not corpus" > $OUT/gpu-tests.log 2>&1
echo "tests rc=$?" >> $OUT/gpu.log; tail -8 $OUT/gpu-tests.log >> $OUT/gpu.log
rm -rf $OUT/*/candidates $OUT/*/*.svg $OUT/*/verdicts.jsonl $OUT/profile/*.py
