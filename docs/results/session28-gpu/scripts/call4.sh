#!/usr/bin/env bash
# Session 28, call 4: corpus/torch at full size, strict, this tree: a regression check of the
# session's changes to norms, scans and capture (sessions 21-22: all that run at full size correct).
set -u
export PYTHONUNBUFFERED=1
OUT=$OUT/corpus FOLDER_LIMIT=400 WORKERS=6 bash benchmarks/corpus_gpu.sh strict 15 torch > $OUT/corpus.log 2>&1
echo "corpus rc=$?" >> $OUT/corpus.log
