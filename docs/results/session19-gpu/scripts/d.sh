#!/usr/bin/env bash
# Call D: allocation forms; networks at batch 1 (launch_overhead.py: host ms per call), HEAD (4ee684d) against this tree.
set -u
export PYTHONUNBUFFERED=1
mkdir -p /tmp/headtree && tar xzf .device/c19/head.tgz -C /tmp/headtree && cp benchmarks/launch_overhead.py /tmp/headtree/benchmarks/
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
PYTHONPATH=$PWD timeout 120 python3 .device/c19/alloc2.py > $OUT/alloc2.log 2>&1
mkdir -p /tmp/b1 && for n in resnet18 mobilenet_v3_small efficientnet_b0; do cp corpus/torchvision/$n.py /tmp/b1/; done
sed -i 's/^SIZE = "small"/SIZE = "full"/' /tmp/b1/*.py && python3 benchmarks/at_batch_one.py /tmp/b1/ >> $OUT/gpu.log 2>&1
for round in 1; do
  echo "== HEAD, round $round" >> $OUT/networks.log
  (cd /tmp/headtree && PYTHONPATH=/tmp/headtree timeout 230 python3 benchmarks/launch_overhead.py /tmp/b1/*.py --mode mixed) 2>&1 | grep -v "^ " >> $OUT/networks.log
  echo "== this tree, round $round" >> $OUT/networks.log
  PYTHONPATH=$PWD timeout 230 python3 benchmarks/launch_overhead.py /tmp/b1/*.py --mode mixed 2>&1 | grep -v "^ " >> $OUT/networks.log
done
