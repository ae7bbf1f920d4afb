#!/usr/bin/env bash
# Call B: DirectLaunch. GPU unit tests; host cost microbench; timed_call_overhead HEAD (4ee684d) against this tree; pointwise bench.
set -u
export PYTHONUNBUFFERED=1
mkdir -p /tmp/headtree && tar xzf .device/c19/head.tgz -C /tmp/headtree && cp benchmarks/timed_call_overhead.py /tmp/headtree/benchmarks/
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
PYTHONPATH=$PWD timeout 60 python3 -m pytest -q tests/test_direct_launch.py >> $OUT/gpu.log 2>&1
PYTHONPATH=$PWD timeout 60 python3 .device/c19/alloc.py > $OUT/alloc.log 2>&1
P="benchmarks/pointwise/add_small.py benchmarks/pointwise/broadcast_max_16mb.py benchmarks/pointwise/relu_large.py benchmarks/pointwise/bias_last_dim.py"
echo "== before (4ee684d)" >> $OUT/overhead.log
(cd /tmp/headtree && PYTHONPATH=/tmp/headtree timeout 100 python3 benchmarks/timed_call_overhead.py $P --stages plain,audit) >> $OUT/overhead.log 2>&1
echo "== after" >> $OUT/overhead.log
PYTHONPATH=$PWD timeout 100 python3 benchmarks/timed_call_overhead.py $P --stages plain,audit >> $OUT/overhead.log 2>&1
cp -r benchmarks/pointwise /tmp/pointwise
PYTHONPATH=$PWD timeout 170 python3 -m drtriton.cli bench /tmp/pointwise --policy builtin --mode strict --device cuda --budget 20 --workers 4 --out $OUT/pw_after >> $OUT/gpu.log 2>&1
rm -rf $OUT/pw_after/candidates $OUT/pw_after/*.svg $OUT/pw_after/summary.json
