#!/usr/bin/env bash
# Session 20, call A: GPU tests of this tree; per-statement forward cost and kernel profiles of the
# pointwise problems, 67ed608 (before: torch.empty(shape), broadcast_shapes, expand) against this
# tree (sizes one by one, per-dim shapes, operands' own strides); networks at batch 1, host time.
# Before it: git archive 67ed608 | gzip > .device/c20/head.tgz; run from the repository root: bash .device/c20/a.sh (OUT set).
set -u
export PYTHONUNBUFFERED=1
mkdir -p /tmp/headtree && tar xzf .device/c20/head.tgz -C /tmp/headtree
cp benchmarks/forward_cost.py benchmarks/kernel_profile.py benchmarks/launch_overhead.py /tmp/headtree/benchmarks/
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
PYTHONPATH=$PWD timeout 200 python3 -m pytest -q -x tests/test_verifier_gpu.py tests/test_direct_launch.py tests/test_cuda_graph.py >> $OUT/gpu.log 2>&1
P="benchmarks/pointwise/add_small.py benchmarks/pointwise/broadcast_max_16mb.py benchmarks/pointwise/bias_gelu.py benchmarks/pointwise/scale_rows.py"
for round in 1 2; do
  echo "== round $round, 67ed608" >> $OUT/forward.log
  (cd /tmp/headtree && PYTHONPATH=/tmp/headtree timeout 100 python3 benchmarks/forward_cost.py $P --trials 200) 2>&1 | grep -v Warning >> $OUT/forward.log
  echo "== round $round, this tree" >> $OUT/forward.log
  PYTHONPATH=$PWD timeout 100 python3 benchmarks/forward_cost.py $P --trials 200 2>&1 | grep -v Warning >> $OUT/forward.log
done
PYTHONPATH=$PWD timeout 120 python3 benchmarks/kernel_profile.py benchmarks/pointwise/*.py --compile --mode strict --calls 20 > $OUT/kprofile.log 2>&1
mkdir -p /tmp/b1 && for n in resnet18 mobilenet_v3_small efficientnet_b0; do cp corpus/torchvision/$n.py /tmp/b1/; done
sed -i 's/^SIZE = "small"/SIZE = "full"/' /tmp/b1/*.py && python3 benchmarks/at_batch_one.py /tmp/b1/ >> $OUT/gpu.log 2>&1
echo "== 67ed608" >> $OUT/networks.log
(cd /tmp/headtree && PYTHONPATH=/tmp/headtree timeout 150 python3 benchmarks/launch_overhead.py /tmp/b1/*.py --mode mixed) 2>&1 | grep -v "^ \|Warning" >> $OUT/networks.log
echo "== this tree" >> $OUT/networks.log
PYTHONPATH=$PWD timeout 150 python3 benchmarks/launch_overhead.py /tmp/b1/*.py --mode mixed 2>&1 | grep -v "^ \|Warning" >> $OUT/networks.log
