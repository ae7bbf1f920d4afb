#!/usr/bin/env bash
# Session 22, call E: the same change on corpus/transformers models whose plans it changes (BERT,
# GPT-2, T5's encoder: position ids, relative position buckets), full size, strict, before/after.
set -u
export PYTHONUNBUFFERED=1
mkdir -p /tmp/headtree && tar xzf .device/c22/head.tgz -C /tmp/headtree
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
mkdir -p /tmp/tsel && for n in bert gpt2 t5_encoder; do cp corpus/transformers/$n.py /tmp/tsel/; done
sed -i 's/^SIZE = "small"/SIZE = "full"/' /tmp/tsel/*.py
for tree in before after; do
  if [ $tree = before ]; then dir=/tmp/headtree; else dir=$PWD; fi
  (cd $dir && PYTHONPATH=$dir timeout 270 python3 -m drtriton.cli bench /tmp/tsel --policy builtin --mode strict --device cuda --budget 30 --workers 4 --out $OUT/$tree) >> $OUT/gpu.log 2>&1
done
for d in before after; do rm -rf $OUT/$d/candidates $OUT/$d/*.svg; done
