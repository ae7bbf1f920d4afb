# Session 37, call 5 (one H200): attention storing its heads merged (419d532, C) against 0620383's
# plans (B), BERT and GPT-2 at full sizes, strict first plans.
set -x
cd "$(dirname "$0")/../../../.."
C=.device/c37
timeout 150 python3 benchmarks/plan_ab.py time --a $C/plansB --b $C/plansC --json $OUT/ab.json --trials 20 \
    $C/full/bert.py $C/full/gpt2.py > $OUT/ab.log 2>&1
grep "ms;\|Error" $OUT/ab.log | cut -c1-400
