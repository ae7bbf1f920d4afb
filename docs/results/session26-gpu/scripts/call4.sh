#!/usr/bin/env bash
# Session 26, call 4: heads of 256. B (this tree) against A (883c1e3) and against two launcher
# variants (gV1: value columns in one program; gV2: and q in one block), each beside eager and compile.
set -u
export PYTHONUNBUFFERED=1
P=benchmarks/attention/wide_heads.py
for pair in "gA gB" "gB gV1" "gB gV2"; do
  set -- $pair
  PYTHONPATH=$PWD timeout 150 python3 benchmarks/plan_ab.py time --a .device/c26/$1 --b .device/c26/$2 --json $OUT/ab-$1-$2.json $P 2>&1 | grep "^wide"
  echo "($1 as A, $2 as B)"
done
