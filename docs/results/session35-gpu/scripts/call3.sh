# Session 35, call 3 (one H200): call 2's A/B for the problems its 330 s limit cut off, and the
# DenseNet-block cat again (call 2's plans lost forward's *features: both trees now bind them);
# A = 3de3e7f (plus the varargs binding), B = this tree.
set -x
cd "$(dirname "$0")/../../../.."
C=.device/c35
timeout 420 python3 benchmarks/plan_ab.py time --a $C/plansA --b $C/plansB --json $OUT/ab.json --trials 30 \
    $C/full/cat_dense_block.py $C/full/squeezenet1_0.py $C/full/shufflenet_v2_x1_0.py $C/full/inception_v3.py > $OUT/ab.log 2>&1
grep "ms;\|Error" $OUT/ab.log | cut -c1-400
