"""Session 34, call 1: does the integer histc lowering (capture.store_lowerings: min and max
truncated, (x - lo) * bins // (hi - lo) in int64) count as CUDA's integer kernel does, to the
element? The CPU has no integer histc, so only the GPU can say. Prints JSON lines."""
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from drtriton.capture import store_lowerings  # noqa: E402

histc = store_lowerings()[torch.ops.aten.histc.default]
gen = torch.Generator(device="cuda").manual_seed(0)
ids = torch.randint(0, 64, (1_000_000,), device="cuda", generator=gen, dtype=torch.int32)
wide = torch.randint(-100_000, 100_000, (1_000_000,), device="cuda", generator=gen, dtype=torch.int32)
for name, t, bins, lo, hi in [("ids", ids, 64, 0, 63), ("ids", ids, 8, 0, 7), ("ids", ids, 10, 0, 0),
                              ("ids", ids, 7, 0.6, 40.9), ("ids", ids, 5, 0.2, 0.7), ("wide", wide, 1000, -50_000, 77_777),
                              ("wide", wide, 3, 0, 0), ("wide int64", wide.long(), 13, -3, 99_999)]:
    want, got = torch.histc(t, bins, lo, hi), histc(t, bins, lo, hi)
    print(json.dumps({"values": name, "dtype": str(t.dtype), "bins": bins, "min": lo, "max": hi,
                      "equal_cuda": bool(torch.equal(got, want)), "dtype_out": str(got.dtype),
                      "abs_diff_cuda": int((got.long() - want.long()).abs().sum())}), flush=True)
