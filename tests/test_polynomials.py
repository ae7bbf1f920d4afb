"""torch.special's orthogonal polynomials (Chebyshev T, U, V, W and their shifted forms, Hermite H
and He, Laguerre L, Legendre P; issue 16: OpInfo found them running in PyTorch). Each is an
elementwise template calling a `@triton.jit` helper that loops over the recurrence
(drtriton/ops/polynomials.py). Checked directly under the interpreter (and compiled, on a GPU where
there is one) on a grid of every branch
(n < 0, 0, 1, a fraction, large n where PyTorch switches to a closed form, |x| = 1, x = 0, |x| > 1,
NaN and infinite degrees, Hermite's limit), and end to end: converted in strict mode and verified.
"""

from __future__ import annotations

import math

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from drtriton import ops  # noqa: E402
from drtriton.ops import polynomials  # noqa: E402
from drtriton.policy.cse import name_common_subexpressions  # noqa: E402
from test_policy_pool_scan_loss import check, source  # noqa: E402

NAMES = [op.name for op in polynomials.OPERATORS]
XS = [-3.0, -1.0, -0.7, -0.2, -0.0, 0.0, 1e-9, 0.25, 0.3, 0.5, 0.75, 0.999, 1.0, 1.3, 2.5, math.nan]
NS = [-5.0, -1.0, -0.5, 0.0, 1.0, 1.7, 2.0, 3.0, 5.0, 7.0, 9.0, 12.0, 20.0, 40.0, 128.0, 129.0, math.nan, math.inf,
      -math.inf]


def test_the_twelve_polynomials_are_in_the_vocabulary():
    assert all(ops.VOCABULARY[name].triton_helpers for name in NAMES)
    assert sorted(NAMES) == sorted(
        [f"{s}chebyshev_polynomial_{k}" for s in ("", "shifted_") for k in "tuvw"]
        + ["hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"])


def test_helpers_use_tl_functions_every_backend_has():
    """Every helper (the polynomials, the incomplete gamma functions, zeta and polygamma, integer
    division): long-standing tl.* only (Triton 3.6 on the GPU, the interpreter), no libdevice."""
    import re

    allowed = {"exp", "log", "abs", "where", "maximum", "minimum", "sqrt", "sin", "cos", "floor", "ceil", "float32",
               "float64", "int64", "zeros_like", "max", "jit", "constexpr", "static_range"}
    for src in ops.HELPERS.values():
        assert set(re.findall(r"\btl\.(\w+)", src)) <= allowed, src
    assert ops.called_helpers("y = _legendre_polynomial_p(x, n)") == [ops.HELPERS["_legendre_polynomial_p"]]
    assert ops.called_helpers("y = x") == []


_X = [a for a in XS for _ in NS]
_N = [b for _ in XS for b in NS]

# The helpers' kernels run in a child process: in the interpreter with TRITON_INTERPRET=1 from its
# start (Triton's own @jit library functions, tl.max, are interpreted only when the variable is set
# before triton is imported, and in a full test run triton is imported long before this module);
# and compiled on the GPU where there is one (the loop with a run-time trip count)
_RUNNER = """
import importlib.util, sys
import torch
spec = importlib.util.spec_from_file_location("poly_kernels", sys.argv[1])
kernels = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kernels)
x, n = (t.to(sys.argv[5]) for t in torch.load(sys.argv[2]))
out = {}
for i in range(int(sys.argv[4])):
    for shift in (0, 1):
        o = torch.empty_like(x)
        getattr(kernels, f"k{i}")[(1,)](x, n + shift, o, x.numel(), BLOCK=1 << (x.numel() - 1).bit_length())
        out[(i, shift)] = o.cpu()
torch.save(out, sys.argv[3])
"""


@pytest.fixture(scope="module", params=["interpreter", "cuda"])
def outputs(request, tmp_path_factory):
    """Each polynomial's kernel on the grid (degrees n and n + 1): under the interpreter, and
    compiled for the GPU."""
    import os
    import subprocess
    import sys

    if request.param == "cuda" and not torch.cuda.is_available():
        pytest.skip("no GPU: the helpers compiled for one are checked where there is one")

    lines = ["import triton", "import triton.language as tl", ""]
    calls = " ".join(ops.VOCABULARY[n].triton_expr({}) for n in NAMES)
    lines += [name_common_subexpressions(src) + "\n" for src in ops.called_helpers(calls)]
    for i, name in enumerate(NAMES):
        expr = ops.VOCABULARY[name].triton_expr({}).format(x="x", y="y")
        lines += ["@triton.jit", f"def k{i}(X, Y, O, N, BLOCK: tl.constexpr):", "    offs = tl.arange(0, BLOCK)",
                  "    m = offs < N", "    x = tl.load(X + offs, mask=m)", "    y = tl.load(Y + offs, mask=m)",
                  f"    tl.store(O + offs, {expr}, mask=m)", ""]
    folder = tmp_path_factory.mktemp("poly")
    (folder / "poly_kernels.py").write_text("\n".join(lines))
    torch.save((torch.tensor(_X), torch.tensor(_N)), folder / "inputs.pt")
    subprocess.run([sys.executable, "-c", _RUNNER, str(folder / "poly_kernels.py"), str(folder / "inputs.pt"),
                    str(folder / "out.pt"), str(len(NAMES)), "cpu" if request.param == "interpreter" else "cuda"],
                   check=True, timeout=600, env={**{k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"},
                                                 **({"TRITON_INTERPRET": "1"} if request.param == "interpreter" else {})})
    return torch.load(folder / "out.pt")


@pytest.mark.parametrize("i,name", list(enumerate(NAMES)), ids=NAMES)
def test_every_branch_matches_pytorch(outputs, i, name):
    x, n = torch.tensor(_X), torch.tensor(_N)
    fn = getattr(torch.special, name)
    want, exact = fn(x, n), fn(x.double(), n.double())
    got = outputs[(i, 0)]
    # PyTorch's float32 is off its float64 by ~n ulps in the closed forms (acos's error times n);
    # ours computes them in float64: within PyTorch's own error of either
    close = torch.isclose(got, want, rtol=1e-4, atol=2e-5, equal_nan=True) | torch.isclose(
        got.double(), exact, rtol=1e-5, atol=1e-6, equal_nan=True)
    bad = (~close).nonzero().flatten()[:5].tolist()
    assert not bad, [(x[j].item(), n[j].item(), got[j].item(), want[j].item()) for j in bad]
    # the grid tells neighbouring degrees apart (an off-by-one in the loop would fail above)
    assert not torch.isclose(outputs[(i, 1)], want, rtol=1e-4, atol=2e-5, equal_nan=True).all()


# end to end: x[..., 0] the argument, x[..., 1] the degree (rows: the verifier also runs the
# problem at another leading size). Values of every branch; integers and a fraction as degrees.
_GRID = ("torch.tensor([[a, b] for a in (-1.0, 1.0, 0.0, 0.5, -0.3, 0.7, 1.3, -2.0, 0.999, 0.25) "
         "for b in (-3.0, -1.0, 0.0, 1.0, 2.0, 2.7, 5.0, 7.0, 9.0, 12.0, 20.0)])")


@pytest.mark.parametrize("name", NAMES)
def test_converts_and_verifies_strict(cpu_verifier, name):
    check(cpu_verifier, source(f"torch.special.{name}(x[..., 0], x[..., 1])", _GRID), [name])


def test_a_number_as_degree_and_two_helpers_in_one_fused_kernel(cpu_verifier):
    """`chebyshev_polynomial_u(x, 11)` (aten's n_scalar overload) beside another polynomial of
    a tensor degree, fused into one kernel: each helper defined once in the module."""
    expr = ("torch.special.chebyshev_polynomial_u(x[..., 0], 11) * 0.5 "
            "+ torch.special.legendre_polynomial_p(x[..., 0], x[..., 1])")
    # (both computed in the add's kernel, where the columns they read are index maps onto x)
    cand = check(cpu_verifier, source(expr, _GRID), ["add"])
    assert len(cand.plan) == 1, cand.plan
    assert cand.source.count("def _chebyshev_polynomial_u(") == 1
    assert cand.source.count("def _legendre_polynomial_p(") == 1
    assert "def _hermite_polynomial_h(" not in cand.source


def test_float64_keeps_its_dtype_and_hermites_higher_limit(cpu_verifier):
    """In float64 Hermite's limit is degree 512 (128 in float32): H_200(0.5) is finite there."""
    grid = "torch.tensor([[a, b] for a in (-0.5, 0.5, 1.0, 2.0) for b in (0.0, 3.0, 127.0, 129.0, 200.0, 513.0)])"
    expr = ("torch.special.hermite_polynomial_h(x[..., 0].double(), x[..., 1]) * 1e-200 "
            "+ torch.special.chebyshev_polynomial_w(x[..., 0].double(), x[..., 1])")
    cand = check(cpu_verifier, source(expr, grid), ["add"])  # (both computed in its kernel)
    assert "def _hermite_polynomial_h(" in cand.source and "def _chebyshev_polynomial_w(" in cand.source
