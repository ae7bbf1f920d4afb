# Session 37, call 2 (one H200): A = a12d4ab (session start), B = this tree's plans (once per
# input shape, copies elided, the query scale folded, tiles), strict first plans at full sizes.
set -x
cd "$(dirname "$0")/../../../.."
C=.device/c37
timeout 560 python3 benchmarks/plan_ab.py time --a $C/plansA --b $C/plansB --json $OUT/ab.json --trials 30 \
    $C/full/transposed_residual.py $C/full/swin_t.py $C/full/t5_encoder.py $C/full/llama.py $C/full/gpt2.py \
    $C/full/bert.py $C/full/th_alias.py $C/full/vit_b_16.py $C/full/convnext_tiny.py > $OUT/ab.log 2>&1
grep "ms;\|Error" $OUT/ab.log | cut -c1-400
