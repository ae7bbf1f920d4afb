"""Session 34, call 3: sorts along rows longer than one program sorts (policy/emit/sort.py,
`_emit_long`), each the built-in policy's first strict plan for a one-line module, run on CUDA
and compared to the element with PyTorch's stable sort (values and indices); then timed beside
eager (do_bench medians). Prints JSON lines."""
import importlib.util
import json
import sys
import tempfile
import warnings
from pathlib import Path

import torch
import triton.testing

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from drtriton.capture import capture_module  # noqa: E402
from drtriton.policy.builtin import BuiltinPolicy  # noqa: E402
from drtriton.problem import from_source  # noqa: E402

CASES = [
    ("torch.sort(x, dim=-1, descending=True, stable=True)", "torch.randn(256, 32000)"),
    ("torch.sort(x, dim=-1, stable=True)", "torch.randint(-50, 50, (16, 50000)).float() / 4"),  # ties
    ("torch.sort(x, dim=-1, stable=True)", "torch.where(torch.rand(4, 9000) < 0.01, float('nan'), torch.randn(4, 9000))"),
    ("torch.sort(x, dim=0, stable=True)", "torch.randn(20000, 3)"),  # I > 1
    ("torch.sort(x, stable=True)", "torch.randint(-1000, 1000, (4097,), dtype=torch.int32)"),
    ("torch.argsort(x.reshape(-1), stable=True)", "torch.randint(0, 64, (2048, 8))"),  # int64 ids, in int32
    ("torch.sort(x, stable=True)", "torch.randint(-3, 4, (8192,)) * 3_000_000_000"),  # int64 by rank
    ("torch.topk(x, 50, dim=-1)", "torch.randn(32, 128256)"),
    ("torch.topk(x, 7, dim=-1, largest=False)", "torch.randn(3, 12288)"),
]


def candidate(expr, inputs):
    src = (f"import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
           f"        return {expr}\n\n\ndef get_inputs():\n    return [{inputs}]\n\n\ndef get_init_inputs():\n"
           "    return []\n")
    problem = from_source(src, name="case")
    ns: dict = {}
    exec(problem.source, ns)
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        graph = capture_module(ns["Model"](), list(ns["get_inputs"]()))
    cand = next(iter(BuiltinPolicy("cuda").candidates(problem, graph, "strict")))
    path = Path(tempfile.mkdtemp()) / "cand.py"
    path.write_text(cand.source)
    spec = importlib.util.spec_from_file_location("cand", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return ns, mod.ModelNew().cuda(), cand.plan


only = sys.argv[1] if len(sys.argv) > 1 else ""  # a substring of the cases to run
for expr, inputs in CASES:
    if only not in expr:
        continue
    try:
        ns, new, plan = candidate(expr, inputs)
        ref = ns["Model"]().cuda()
        torch.manual_seed(0)
        x = eval(inputs, {"torch": torch}).cuda()
        with torch.no_grad():
            want, got = ref(x), new(x)
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, tuple) else (got,)
        equal = all(torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)) and torch.equal(a.isnan(), b.isnan())
                    if a.is_floating_point() else torch.equal(a, b) for a, b in zip(got, want))
        eager = triton.testing.do_bench(lambda: ref(x), rep=200)
        ours = triton.testing.do_bench(lambda: new(x), rep=200)
        print(json.dumps({"expr": expr, "input": inputs, "plan": plan, "equal": equal,
                          "eager_us": round(eager * 1e3, 1), "triton_us": round(ours * 1e3, 1)}), flush=True)
    except Exception as e:  # noqa: BLE001 - one case's failure is reported, the rest go on
        print(json.dumps({"expr": expr, "input": inputs, "error": f"{type(e).__name__}: {e}"[:500]}), flush=True)
