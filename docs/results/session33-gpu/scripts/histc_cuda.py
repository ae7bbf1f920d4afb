"""Session 33, call 2: does the histc lowering (capture.store_lowerings) count as torch.histc on
CUDA, to the element? PyTorch's CPU kernel was matched exactly on the CPU (tests/test_histc.py);
this compares on the GPU, where PyTorch runs another kernel (SummaryOps.cu). Prints JSON lines."""
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from drtriton.capture import store_lowerings  # noqa: E402

histc = store_lowerings()[torch.ops.aten.histc.default]
gen = torch.Generator(device="cuda").manual_seed(0)
x = torch.randn(4_000_000, device="cuda", generator=gen) * 0.7
ids = torch.randint(0, 8, (100_000,), device="cuda", generator=gen).float()
for name, t, bins, lo, hi in [("randn", x, 100, 0, 0), ("randn", x, 7, -1.0, 1.3), ("randn", x, 64, -0.5, 0.5),
                              ("randn", x, 1000, -2.0, 2.0), ("ids", ids, 8, 0, 7), ("uniform", x.sigmoid(), 10, 0, 1)]:
    want, got = torch.histc(t, bins, lo, hi), histc(t, bins, lo, hi)
    cpu = torch.histc(t.cpu(), bins, lo, hi)
    print(json.dumps({"values": name, "bins": bins, "min": lo, "max": hi, "equal_cuda": bool(torch.equal(got, want)),
                      "abs_diff_cuda": float((got - want).abs().sum()), "cuda_vs_cpu_abs_diff": float((want.cpu() - cpu).abs().sum())}),
          flush=True)
