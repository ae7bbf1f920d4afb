"""The special functions written in tl.* arithmetic (lgamma, digamma, erfinv, ndtri, erfcx, the
modified Bessel functions I0, I1, K0, K1, scaled or not, Bessel J0, J1, Y0, Y1, spherical j0) at their
special values and far tails, against PyTorch in float64, under the Triton interpreter (the
elementwise check covers their ordinary ranges)."""

import importlib.util
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from drtriton.ops import VOCABULARY  # noqa: E402

INF = math.inf
CASES = {
    "lgamma": [INF, -INF, 0.0, -1.0, -2.5, 1.0, 2.0, 1e-3, -3.001, 30.0, 1e4],
    "digamma": [INF, 0.0, -1.0, -2.5, -3.001, 1.0, 1e-3, 1e4],
    "erfinv": [1.0, -1.0, 0.0, 0.999999, -0.5],
    "ndtri": [0.0, 1.0, 1e-10, 1e-30, 0.5, 1 - 1e-7, 0.02, 0.975],
    "erfcx": [0.0, 0.3, 5.0, 30.0, 1e4, -0.3, -3.0, -9.0, INF],
    "i0": [0.0, 1e-3, 1.0, -3.7, 3.8, 20.0, -50.0],
    "i0e": [0.0, 1e-3, 1.0, -3.7, 3.8, 20.0, -500.0, 1e4],
    "i1": [0.0, 1e-3, -1.0, 3.7, -3.8, 20.0, 50.0],
    "i1e": [0.0, 1e-3, -1.0, 3.7, -3.8, 20.0, -500.0, 1e4],
    # J and Y: zeros, both sides of the switch to the asymptotic form at 8, far out, and below 0
    **{f"bessel_{k}": [0.0, -0.0, 1e-3, 2.404825, 3.831706, 7.999, 8.0, 8.001, 40.0, 1e3, INF, -5.0, -9.0]
       for k in ("j0", "j1", "y0", "y1")},
    **{f"{s}modified_bessel_{k}": [0.0, 1e-4, 1.999, 2.0, 2.001, 10.0, 80.0, INF, -1.0]
       for s in ("", "scaled_") for k in ("k0", "k1")},
    "spherical_bessel_j0": [0.0, 1e-4, -0.499, 0.5, 3.14159, -20.0, INF, -INF],
}
TORCH = {"lgamma": torch.lgamma, "digamma": torch.digamma, "erfinv": torch.erfinv, "ndtri": torch.special.ndtri,
         "erfcx": torch.special.erfcx, "i0": torch.special.i0, "i0e": torch.special.i0e, "i1": torch.special.i1,
         "i1e": torch.special.i1e,
         **{name: getattr(torch.special, name) for name in (
             "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_k0", "modified_bessel_k1",
             "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0")}}


def _kernel(name, tmp_path):
    expr = VOCABULARY[name].triton_expr({}).format(x="x")
    path = tmp_path / f"k_{name}.py"
    path.write_text("import triton\nimport triton.language as tl\n\n@triton.jit\n"
                    "def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
                    "    o = tl.arange(0, BLOCK)\n    m = o < n\n"
                    "    x = tl.load(x_ptr + o, mask=m, other=0.5)\n"
                    f"    tl.store(y_ptr + o, {expr}, mask=m)\n")
    spec = importlib.util.spec_from_file_location(f"k_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.k


@pytest.mark.parametrize("name", sorted(CASES))
def test_special_values_and_tails_match_pytorch(name, tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    x = torch.tensor(CASES[name], dtype=torch.float32)
    y = torch.empty_like(x)
    _kernel(name, tmp_path)[(1,)](x, y, x.numel(), BLOCK=16)
    want = TORCH[name](x.double()).float()
    same_special = (torch.isnan(y) == torch.isnan(want)) & (torch.isinf(y) == torch.isinf(want))
    assert same_special.all(), (x, y, want)
    finite = torch.isfinite(want)
    torch.testing.assert_close(y[finite], want[finite], rtol=1e-5, atol=1e-5)
    assert (torch.sign(y[torch.isinf(want)]) == torch.sign(want[torch.isinf(want)])).all()
