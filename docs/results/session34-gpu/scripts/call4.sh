# Session 34, call 4 (one H200): top-k along long rows placing only each chunk's first k keys;
# the two MoE problems through the product path (drtriton bench: search, verifier, strict), with
# transformers 5.24 carried.
set -x
cd "$(dirname "$0")/../../../.."
export PYTHONPATH=$PWD/.device/c34/tf:$PWD
S=docs/results/session34-gpu/scripts
timeout 100 python3 $S/sort_long_cuda.py topk > $OUT/topk_long.jsonl 2>$OUT/topk_long.err
cut -c1-400 $OUT/topk_long.jsonl
timeout 430 python3 -m drtriton.cli bench benchmarks/moe --policy builtin --mode strict --budget 150 --workers 2 \
    --device cuda --out $OUT/moe_bench > $OUT/moe_bench.log 2>&1
tail -5 $OUT/moe_bench.log | cut -c1-300
grep "^|" $OUT/moe_bench/report.md | cut -c1-400 | head -20
