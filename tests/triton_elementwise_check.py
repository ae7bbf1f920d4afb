"""Run every elementwise operator's Triton template under the Triton interpreter.

Run as a script (``TRITON_INTERPRET=1`` must be set before triton is imported, so the test runs
this in a subprocess). Prints one JSON line per (operator, attrs) case: the worst relative error
against the PyTorch reference and whether it is within tolerance.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import sys
import tempfile

# `--cuda`: compiled for the GPU (benchmarks run it there: the same templates, real Triton)
CUDA = "--cuda" in sys.argv
if not CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

from drtriton import ops  # noqa: E402

RTOL, ATOL = 1e-5, 1e-6
#: near zero, where naive exp(x) - 1, log(1 + y) and tanh formulas cancel, demand relative
#: accuracy (PyTorch is accurate there; atol alone would hide a 100% relative error)
TINY_ATOL = 1e-12
BLOCK = 1024


def attr_cases(op):
    """Every combination of the operator's Choice attributes (its whole attribute space)."""
    specs = [s for s in op.attrs if isinstance(s, ops.Choice)]
    if not specs:
        return [{}]
    cases = []
    for combo in itertools.product(*[dict.fromkeys(s.values) for s in specs]):
        attrs = {}
        for spec, value in zip(specs, combo):
            attrs.update(dict(zip(spec.name, value)) if isinstance(spec.name, tuple) else {spec.name: value})
        cases.append(attrs)
    return cases


def kernel_source(cases):
    lines = ["import triton", "import triton.language as tl", ""]
    # the device functions templates call (a recurrence's loop), as a module defines them
    lines += [src + "\n" for src in ops.called_helpers(" ".join(op.triton_expr(a) for op, a in cases))]
    for i, (op, attrs) in enumerate(cases):
        expr = op.triton_expr(attrs).format(x="x", y="y", z="z")
        lines += [
            "@triton.jit",
            f"def k{i}(X, Y, Z, O, n, BLOCK: tl.constexpr):",
            "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
            "    mask = offs < n",
            "    x = tl.load(X + offs, mask=mask)",
            "    y = tl.load(Y + offs, mask=mask)" if op.arity >= 2 else "    y = x",
            "    z = tl.load(Z + offs, mask=mask)" if op.arity >= 3 else "    z = x",
            f"    tl.store(O + offs, {expr}, mask=mask)",
            "",
        ]
    return "\n".join(lines)


def inputs(n, domain="real"):
    """Normal, wide, large and tiny values of both signs; the tiny ones are the last quarter.
    The positive domain: their magnitudes plus 0.5; the unit domain: values in (-1, 1); probability:
    in (0, 1); above_one: their magnitudes plus 1."""
    gen = torch.Generator().manual_seed(0)
    x = torch.cat([
        torch.randn(n // 4, generator=gen),
        torch.randn(n // 4, generator=gen) * 8,
        (torch.rand(n // 4, generator=gen) - 0.5) * 200,
        (torch.rand(n - 3 * (n // 4), generator=gen) - 0.5) * 1e-2,
    ])
    if domain == "positive":
        return x.abs() + 0.5
    if domain == "unit":
        return torch.tanh(x) * 0.999
    if domain == "probability":  # (0, 1), tails included
        return (torch.tanh(x) * 0.999 + 1.0) / 2.0
    if domain == "above_one":  # 1 + the magnitudes: the tiny ones just above 1
        return 1.0 + x.abs()
    if domain == "mask":
        return x > 0.3
    if domain == "integer":  # both signs, every bit pattern of the low bits
        return (x * 50).round().to(torch.int64)
    return x


class _Naive:
    """Negative control: ELU with a plain exp(x) - 1, which loses accuracy near zero. The check
    must flag it, or the inputs are not discriminating enough."""

    name, arity, slots = "naive_elu", 1, ops.get("elu").slots

    @staticmethod
    def triton_expr(attrs):
        return "tl.where({x} > 0.0, {x}, tl.exp({x}) - 1.0)"

    @staticmethod
    def reference(inputs, attrs):
        return ops.get("elu").reference(inputs, {"alpha": 1.0})


def main():
    cases = [(op, attrs) for op in ops.VOCABULARY.values() if op.triton_template is not None
             for attrs in attr_cases(op)]
    cases.append((_Naive, {}))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "elementwise_kernels.py")
        with open(path, "w") as f:
            f.write(kernel_source(cases))
        spec = importlib.util.spec_from_file_location("elementwise_kernels", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        n = BLOCK
        for i, (op, attrs) in enumerate(cases):
            # each slot its own draw (flipped, rolled), so binary operands differ element by element
            x, y, z = [inputs(n, op.slots[min(j, op.arity - 1)].domain).roll(j * 97).flip(0) if j else
                       inputs(n, op.slots[0].domain) for j in range(3)]
            if op.arity == 2 and op.slots[1].name == "n":  # a polynomial's degree: -2..4, where the
                # recurrence decides (PyTorch's float32 closed forms for larger ones are off by more
                # than RTOL: tests/test_polynomials.py checks them against float64 too)
                y = torch.randint(-2, 5, (n,), generator=torch.Generator().manual_seed(1)).float()
            ref = op.reference([x, y, z][: op.arity], attrs)  # on the CPU: the same reference either way
            if CUDA:
                x, y, z = x.cuda(), y.cuda(), z.cuda()
            out = torch.empty_like(ref, device=x.device)
            getattr(module, f"k{i}")[(1,)](x, y, z, out, n, BLOCK=BLOCK)
            out = out.cpu()
            tiny = slice(3 * (n // 4), n)
            if not ref.is_floating_point():  # booleans: every element exact
                ok, worst = bool(torch.equal(out, ref)), int((out != ref).int().argmax())
                print(json.dumps({"op": op.name, "attrs": attrs, "ok": ok, "worst_x": float(x[worst]),
                                  "got": float(out[worst]), "want": float(ref[worst])}))
                continue
            err = ((out - ref).abs() - ATOL) / ref.abs().clamp_min(1e-30)
            worst = int(err.argmax())
            ok = bool(torch.allclose(out, ref, rtol=RTOL, atol=ATOL)
                      and torch.allclose(out[tiny], ref[tiny], rtol=RTOL, atol=TINY_ATOL))
            print(json.dumps({"op": op.name, "attrs": attrs, "ok": ok,
                              "worst_x": float(x[worst]), "got": float(out[worst]), "want": float(ref[worst])}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
