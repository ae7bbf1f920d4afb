# Session 36, call 1 (one H200): views read in place (A = 8278acf, B = this tree), strict first
# plans at full sizes: two one-idiom problems, th_alias, two corpus transformers, three
# torchvision networks with permuted views; cat_features_linear re-timed (unchanged A to B).
set -x
cd "$(dirname "$0")/../../../.."
C=.device/c36
timeout 560 python3 benchmarks/plan_ab.py time --a $C/plansA --b $C/plansB --json $OUT/ab.json --trials 30 \
    $C/full/transposed_residual.py $C/full/gated_halves.py $C/full/th_alias.py $C/full/cat_features_linear.py \
    $C/full/llama.py $C/full/gpt2.py $C/full/vit_b_16.py $C/full/convnext_tiny.py $C/full/swin_t.py > $OUT/ab.log 2>&1
grep "ms;\|Error" $OUT/ab.log | cut -c1-400
