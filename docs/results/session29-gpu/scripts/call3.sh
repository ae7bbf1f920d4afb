#!/usr/bin/env bash
# Session 29, call 3: the branch checks on torch 2.11 (GaussianNLLLoss converts; a branch on the
# data fails with its message), then the corpus/torch regression check at full sizes.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
python3 -c "import torch; print('torch', torch.__version__, 'redispatch_function', hasattr(torch.overrides, 'redispatch_function'))" >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 150 python3 -m drtriton.cli bench .device/c29/p3 --policy builtin --mode strict \
  --device cuda --budget 30 --workers 4 --out $OUT/bench3 > $OUT/bench3.log 2>&1
echo "bench3 rc=$?" >> $OUT/gpu.log
OUT=$OUT/corpus FOLDER_LIMIT=400 WORKERS=6 timeout 380 bash benchmarks/corpus_gpu.sh strict 15 torch > $OUT/corpus.log 2>&1
echo "corpus rc=$?" >> $OUT/gpu.log
rm -rf $OUT/*/candidates $OUT/*/*.svg $OUT/*/verdicts.jsonl $OUT/corpus/*/candidates
