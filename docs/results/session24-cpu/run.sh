#!/bin/bash
# usage: run.sh TREE OUTDIR files...
tree=$1; out=$2; shift 2
mkdir -p $out
for f in "$@"; do
  n=$(basename $f .py)
  ( cd /tmp/sweep && PYTHONPATH=$tree timeout 900 /tmp/drtriton-ci-venv/bin/python -m drtriton.cli convert $f --device cpu --mode strict --budget 300 --out $out/${n}_triton.py --keep $out/keep_$n > $out/$n.log 2>&1; echo "$n rc=$?" >> $out/summary.txt )
done
