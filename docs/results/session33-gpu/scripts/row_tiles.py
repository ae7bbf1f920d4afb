"""Session 33, call 1: the rows template's tile along contiguous rows (I == 1). For each row
operation (sum, softmax, log_softmax, amax, mean of squares) and shape (rows x R), the built-in
policy's first plan with each (BLOCK_R, num_warps) forced through `rows.LONG_ROW_TILES`, checked
against eager, timed with do_bench (L2 flushed, median) beside eager and the bandwidth floor
(bytes read and written / the device-to-device copy rate). Prints JSON lines.

    PYTHONPATH=. python3 docs/results/session33-gpu/scripts/row_tiles.py > rows.jsonl
"""
import importlib.util
import json
import sys
import tempfile
import warnings
from pathlib import Path

import torch
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from benchmarks.kernel_profile import first_plan  # noqa: E402
from drtriton.policy.emit import rows  # noqa: E402
from drtriton.problem import Problem  # noqa: E402
from drtriton.verify.worker.timing import measure_bandwidth_bytes_per_ms  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
OPS = {  # name -> (forward body, bytes moved per element: read + written)
    "sum": ("return x.sum(dim=-1)", 4),
    "softmax": ("return torch.softmax(x, dim=-1)", 8),
    "log_softmax": ("return torch.log_softmax(x, dim=-1)", 8),
    "amax": ("return x.amax(dim=-1)", 4),
    "mean_sq": ("return (x * x).mean(dim=-1, keepdim=True)", 4),
}
SHAPES = [(256, 32000), (64, 32000), (32, 128256), (1024, 8192), (4096, 4096), (16384, 1024), (8, 50257)]
TILES = [(1024, 4), (2048, 4), (2048, 8), (4096, 8), (4096, 16), (8192, 16)]


def source(body: str, rows_: int, r: int) -> str:
    return (f"import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
            f"        {body}\n\ndef get_inputs():\n    return [torch.randn({rows_}, {r})]\n\n"
            f"def get_init_inputs():\n    return []\n")


def load(src: str, name: str, folder: str):
    path = Path(folder) / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    rate = measure_bandwidth_bytes_per_ms()
    print(json.dumps({"copy_rate_GBps": rate / 1e6}), flush=True)
    folder = tempfile.mkdtemp()
    for op, (body, per_elem) in OPS.items():
        for rows_, r in SHAPES:
            src = source(body, rows_, r)
            x = torch.randn(rows_, r, device="cuda")
            ref_mod = load(src, f"ref_{op}_{rows_}_{r}", folder).Model().cuda()
            with torch.no_grad():
                ref = ref_mod(x)
                eager_ms = do_bench(lambda: ref_mod(x))
            floor_ms = rows_ * r * per_elem / rate
            rec = {"op": op, "rows": rows_, "R": r, "eager_ms": eager_ms, "floor_ms": floor_ms, "tiles": {}}
            for block_r, warps in TILES:
                rows.LONG_ROW_TILES[:] = rows.SOFTMAX_ROW_TILES[:] = [(0, block_r, warps)]
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        _, cand = first_plan(Problem(name=op, source=src, class_name="Model"), "strict")
                    mod = load(cand.source, f"c_{op}_{rows_}_{r}_{block_r}_{warps}", folder)
                    model = mod.ModelNew().cuda()
                    with torch.no_grad():
                        out = model(x)
                        ok = torch.allclose(out, ref, rtol=1e-4, atol=1e-5)
                        ms = do_bench(lambda: model(x))
                    rec["tiles"][f"{block_r}x{warps}"] = {"ms": ms, "ok": bool(ok)}
                except Exception as e:  # noqa: BLE001 - one tile's failure is reported, the rest go on
                    rec["tiles"][f"{block_r}x{warps}"] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
            print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
