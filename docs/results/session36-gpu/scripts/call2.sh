# Session 36, call 2 (one H200): corpus/torch at full sizes through drtriton bench, strict, this tree.
set -x
cd "$(dirname "$0")/../../../.."
OUT=$OUT/corpus FOLDER_LIMIT=400 WORKERS=6 bash benchmarks/corpus_gpu.sh strict 15 torch 2>&1 | tail -40
# the three torchvision networks whose plans changed and that call 1 did not check (small sizes)
timeout 150 python3 benchmarks/plan_ab.py time --a .device/c36/small/A --b .device/c36/small/B --json $OUT/small.json --trials 5 .device/c36/small/p/*.py > $OUT/small.log 2>&1
grep "ms;\|Error" $OUT/small.log | cut -c1-300
