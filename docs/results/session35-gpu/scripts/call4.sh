# Session 35, call 4 (one H200): a pre-activation batch norm and ReLU computed in the next
# convolution's prologue (and a cat of more than 4 inputs left without an epilogue, so it copies).
# plan_ab, A = 3de3e7f (plus the varargs binding), B = this tree: DenseNet-121 (full size) and the
# two corpus problems whose plans changed otherwise (nested_blocks: its squeeze-and-excitation
# scale now the convolution's prologue; th_alias: its cat copies); then DenseNet-121 through
# drtriton bench, one worker.
set -x
cd "$(dirname "$0")/../../../.."
C=.device/c35
timeout 270 python3 benchmarks/plan_ab.py time --a $C/A --b $C/B --json $OUT/ab.json --trials 30 \
    $C/full/densenet121.py $C/full/nested_blocks.py $C/full/th_alias.py > $OUT/ab.log 2>&1
grep "ms;\|Error" $OUT/ab.log | cut -c1-400
timeout 170 python3 -m drtriton.cli bench $C/dn --policy builtin --mode strict --budget 30 --workers 1 --device cuda --out $OUT/dn_bench > $OUT/dn_bench.log 2>&1
tail -3 $OUT/dn_bench.log | cut -c1-300
