#!/usr/bin/env bash
# Session 28, call 3: the A/B of call 2 again, tree A run from its own folder (call 2's A ran
# this tree: `python -m` puts the working folder first on sys.path); then the GPU verifier tests.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
(cd .device/c28/treeA && PYTHONPATH=$PWD timeout 200 python3 -m drtriton.cli bench ../p2 --policy builtin --mode strict \
  --device cuda --budget 20 --workers 8 --out $OUT/benchA > $OUT/benchA.log 2>&1; echo "bench A rc=$?" >> $OUT/gpu.log)
grep -c "masked_update" .device/c28/treeA/drtriton/capture.py >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 150 python3 -m drtriton.cli bench .device/c28/p2 --policy builtin --mode strict \
  --device cuda --budget 20 --workers 8 --out $OUT/benchB > $OUT/benchB.log 2>&1
echo "bench B rc=$?" >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 200 python3 -m pytest -q -p no:cacheprovider -p no:xdist -o addopts="-ra" \
  tests/test_verifier_gpu.py tests/test_direct_launch.py -k "not attention and not corpus" > $OUT/gpu-tests.log 2>&1
echo "tests rc=$?" >> $OUT/gpu.log; tail -8 $OUT/gpu-tests.log >> $OUT/gpu.log
rm -rf $OUT/*/candidates $OUT/*/*.svg $OUT/*/verdicts.jsonl
