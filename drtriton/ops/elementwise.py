"""Elementwise operators: activations, arithmetic with a scalar, and binary ops with broadcasting.

FLOPs: one per output element (KernelBench-style counting; transcendental cost is not weighed).
Each operator has a Triton scalar template over ``{x}`` (and ``{y}``) built from ``tl.*`` only:
no ``libdevice`` (broken in the Triton interpreter) and no ``tl.math.tanh`` (missing in some
releases). Where the naive formula loses relative accuracy near zero (``exp(x) - 1``,
``log(1 + y)``, ``tanh``) a short Taylor branch takes over, so templates match PyTorch to
about 1e-6 relative.
"""

from __future__ import annotations

import random

from drtriton.ops.operator import ANY_RANK, Choice, Operator, Slot
from drtriton.ops.shape import broadcast_shapes

# -- Triton building blocks (each takes an expression string, returns one) ---------------------


def _poly(e: str, coeffs: tuple[float, ...]) -> str:
    """c0 + e*(c1 + e*(c2 + ...)) in Horner form."""
    text = repr(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        text = f"{c!r} + {e} * ({text})"
    return f"({text})"


def expm1(e: str) -> str:
    small = f"{e} * {_poly(e, (1.0, 0.5, 1 / 6, 1 / 24, 1 / 120))}"
    return f"tl.where(tl.abs({e}) < 0.1, {small}, tl.exp({e}) - 1.0)"


def log1p(e: str) -> str:
    """log(1 + e) for e >= 0."""
    small = f"{e} * {_poly(e, (1.0, -1 / 2, 1 / 3, -1 / 4, 1 / 5))}"
    return f"tl.where({e} < 0.05, {small}, tl.log(1.0 + {e}))"


def tanh(e: str) -> str:
    sq = f"{e} * {e}"
    small = f"{e} * {_poly(sq, (1.0, -1 / 3, 2 / 15, -17 / 315))}"
    t = f"tl.exp(-2.0 * tl.abs({e}))"
    large = f"tl.where({e} >= 0.0, 1.0, -1.0) * (1.0 - {t}) / (1.0 + {t})"
    return f"tl.where(tl.abs({e}) < 0.1, {small}, {large})"


def softplus(e: str) -> str:
    """log(1 + exp(e)) without overflow."""
    return f"(tl.maximum({e}, 0.0) + {log1p(f'tl.exp(-tl.abs({e}))')})"


def sigmoid(e: str) -> str:
    return f"(1.0 / (1.0 + tl.exp(-{e})))"


_SELU_ALPHA = 1.6732632423543772
_SELU_SCALE = 1.0507009873554805

# -- shape rules ----------------------------------------------------------------------------------


def same_shape(ctx, dims, attrs):
    out = list(dims[0])
    return out, ctx.mul(*out)


def broadcast_rule(ctx, dims, attrs):
    out = broadcast_shapes(ctx, *dims)
    return out, ctx.mul(*out)


def broadcast_fresh(rng: random.Random, slot: int, anchor_slot: int, anchor_rank: int) -> list:
    """Shape of a new operand broadcast against an existing one: the full shape, a per-channel
    bias (C, 1, ..., 1), a row over the last axis, a (1,) scalar, or a random mask of kept axes."""
    r = anchor_rank
    if r == 0:
        return []
    kind = rng.random()
    if kind < 0.45:
        return list(range(r))
    if kind < 0.65 and r >= 2:
        return [1] + ["one"] * (r - 2)
    if kind < 0.8:
        return [r - 1]
    if kind < 0.9:
        return ["one"]
    kept = rng.randint(1, r)
    return [a if rng.random() < 0.6 else "one" for a in range(r - kept, r)]


# -- constructors ---------------------------------------------------------------------------------


def _unary(name, torch_template, triton_template, description, *, attrs=(), fns=(), methods=(),
           modules=()):
    return Operator(
        name=name, category="elementwise_unary", slots=(Slot("input", ANY_RANK),), rule=same_shape,
        torch_template=torch_template, triton_template=triton_template, description=description,
        attrs=attrs, torch_functions=fns, tensor_methods=methods, module_types=modules,
    )


def _binary(name, torch_template, triton_template, description, *, fns, methods,
            commutative=False, other_domain="real"):
    return Operator(
        name=name, category="elementwise_binary",
        slots=(Slot("input", ANY_RANK), Slot("other", ANY_RANK, domain=other_domain)),
        rule=broadcast_rule, torch_template=torch_template, triton_template=triton_template,
        description=description, torch_functions=fns, tensor_methods=methods,
        commutative=commutative, fresh=broadcast_fresh,
    )


def _gelu_torch(attrs):
    return "F.gelu({x})" if attrs.get("approximate", "none") == "none" else "F.gelu({x}, approximate={approximate})"


def _gelu_triton(attrs):
    if attrs.get("approximate", "none") == "none":
        return "0.5 * {x} * (1.0 + tl.erf({x} * 0.7071067811865476))"
    inner = "(0.7978845608028654 * ({x} + 0.044715 * {x} * {x} * {x}))"
    return f"0.5 * {{x}} * (1.0 + {tanh(inner)})"


def _softplus_triton(attrs):
    bx = "({beta} * {x})"
    return f"tl.where({bx} > {{threshold}}, {{x}}, {softplus(bx)} / {{beta}})"


def _pow_triton(attrs):
    exponent = attrs.get("exponent", 2)
    if float(exponent).is_integer() and 1 <= exponent <= 4:
        return " * ".join(["{x}"] * int(exponent))
    return "tl.exp({exponent} * tl.log({x}))"  # other exponents (traced programs): x > 0 only


def _clamp_triton(low: str, high: str):
    """clamp/hardtanh; a bound that is None (``torch.clamp(x, min=0)``) is left out."""

    def template(attrs):
        expr = "{x}"
        if attrs.get(low) is not None:
            expr = f"tl.maximum({expr}, {{{low}}})"
        if attrs.get(high) is not None:
            expr = f"tl.minimum({expr}, {{{high}}})"
        return expr

    return template


def _add_scalar_torch(attrs):
    # x - c and x + (-c) are the same IEEE operation: render the natural spelling
    return "{x} + {value}" if attrs["value"] >= 0 else "{x} - " + repr(-attrs["value"])


_F = "torch.nn.functional."

UNARY = (
    _unary("relu", "torch.relu({x})", "tl.maximum({x}, 0.0)", "max(x, 0)",
           fns=("torch.relu", _F + "relu"), methods=("relu",), modules=("torch.nn.ReLU",)),
    _unary("leaky_relu", "F.leaky_relu({x}, negative_slope={negative_slope})",
           "tl.where({x} > 0.0, {x}, {x} * {negative_slope})", "x if x > 0 else slope * x",
           attrs=(Choice("negative_slope", (0.01, 0.05, 0.1, 0.2)),),
           fns=(_F + "leaky_relu",), modules=("torch.nn.LeakyReLU",)),
    _unary("gelu", _gelu_torch, _gelu_triton, "Gaussian error linear unit (erf or tanh form)",
           attrs=(Choice("approximate", ("none", "tanh")),), fns=(_F + "gelu",),
           modules=("torch.nn.GELU",)),
    _unary("silu", "F.silu({x})", "{x} / (1.0 + tl.exp(-{x}))", "x * sigmoid(x) (swish)",
           fns=(_F + "silu",), modules=("torch.nn.SiLU",)),
    _unary("sigmoid", "torch.sigmoid({x})", sigmoid("{x}"), "1 / (1 + exp(-x))",
           fns=("torch.sigmoid", _F + "sigmoid"), methods=("sigmoid",),
           modules=("torch.nn.Sigmoid",)),
    _unary("tanh", "torch.tanh({x})", tanh("{x}"), "hyperbolic tangent",
           fns=("torch.tanh", _F + "tanh"), methods=("tanh",), modules=("torch.nn.Tanh",)),
    _unary("softplus", "F.softplus({x}, beta={beta}, threshold={threshold})", _softplus_triton,
           "log(1 + exp(beta x)) / beta, linear above the threshold",
           attrs=(Choice("beta", (0.5, 1.0, 2.0)), Choice("threshold", (20.0,))),
           fns=(_F + "softplus",), modules=("torch.nn.Softplus",)),
    _unary("mish", "F.mish({x})", "{x} * " + tanh(softplus("{x}")), "x * tanh(softplus(x))",
           fns=(_F + "mish",), modules=("torch.nn.Mish",)),
    _unary("hardswish", "F.hardswish({x})", "{x} * tl.minimum(tl.maximum({x} + 3.0, 0.0), 6.0) / 6.0",
           "x * relu6(x + 3) / 6", fns=(_F + "hardswish",), modules=("torch.nn.Hardswish",)),
    _unary("hardsigmoid", "F.hardsigmoid({x})", "tl.minimum(tl.maximum({x} + 3.0, 0.0), 6.0) / 6.0",
           "relu6(x + 3) / 6", fns=(_F + "hardsigmoid",), modules=("torch.nn.Hardsigmoid",)),
    _unary("elu", "F.elu({x}, alpha={alpha})", "tl.where({x} > 0.0, {x}, {alpha} * " + expm1("{x}") + ")",
           "x if x > 0 else alpha * (exp(x) - 1)", attrs=(Choice("alpha", (0.5, 1.0, 2.0)),),
           fns=(_F + "elu",), modules=("torch.nn.ELU",)),
    _unary("selu", "torch.selu({x})",
           f"{_SELU_SCALE!r} * tl.where({{x}} > 0.0, {{x}}, {_SELU_ALPHA!r} * {expm1('{x}')})",
           "scaled ELU with the self-normalising constants", fns=("torch.selu", _F + "selu"),
           modules=("torch.nn.SELU",)),
    _unary("hardtanh", "F.hardtanh({x}, min_val={min_val}, max_val={max_val})",
           _clamp_triton("min_val", "max_val"), "clamp to [min_val, max_val]",
           attrs=(Choice(("min_val", "max_val"), ((-1.0, 1.0), (-2.0, 2.0), (0.0, 1.0), (-0.5, 0.5))),),
           fns=(_F + "hardtanh",), modules=("torch.nn.Hardtanh",)),
    _unary("clamp", "torch.clamp({x}, min={min}, max={max})",
           _clamp_triton("min", "max"), "clamp to [min, max]",
           attrs=(Choice(("min", "max"), ((0.0, 1.0), (-1.0, 1.0), (-0.5, 2.0), (-2.0, 0.5))),),
           fns=("torch.clamp", "torch.clip"), methods=("clamp", "clip")),
    _unary("softsign", "F.softsign({x})", "{x} / (1.0 + tl.abs({x}))", "x / (1 + |x|)",
           fns=(_F + "softsign",), modules=("torch.nn.Softsign",)),
    _unary("abs", "torch.abs({x})", "tl.abs({x})", "|x|", fns=("torch.abs",),
           methods=("abs", "__abs__")),
    _unary("pow", "torch.pow({x}, {exponent})", _pow_triton, "x ** p for a small integer power",
           attrs=(Choice("exponent", (2, 3)),), fns=("torch.pow", "operator.pow"), methods=("pow", "__pow__")),
    _unary("add_scalar", _add_scalar_torch, "{x} + {value}", "x + c (also spelled x - c)",
           attrs=(Choice("value", (-1.0, -0.5, -0.1, 0.1, 0.5, 1.0, 2.0)),),
           fns=("operator.add", "operator.sub", "torch.add", "torch.sub", "torch.subtract"),
           methods=("add", "sub", "__add__", "__radd__", "__sub__")),
    _unary("mul_scalar", "{x} * {value}", "{x} * {value}", "x * c (scaling)",
           attrs=(Choice("value", (-1.0, 0.1, 0.5, 1.5, 2.0, 3.0)),),
           fns=("operator.mul", "torch.mul", "torch.multiply"), methods=("mul", "__mul__", "__rmul__")),
    _unary("div_scalar", "{x} / {value}", "{x} / {value}", "x / c",
           attrs=(Choice("value", (-2.0, 0.5, 1.5, 2.0, 3.0, 10.0)),),
           fns=("operator.truediv", "torch.div", "torch.divide"), methods=("div", "__truediv__")),
)

BINARY = (
    _binary("add", "{x} + {y}", "{x} + {y}", "x + y, broadcasting", commutative=True,
            fns=("operator.add", "torch.add"), methods=("add", "__add__", "__radd__")),
    _binary("sub", "{x} - {y}", "{x} - {y}", "x - y, broadcasting",
            fns=("operator.sub", "torch.sub", "torch.subtract"), methods=("sub", "__sub__")),
    _binary("mul", "{x} * {y}", "{x} * {y}", "x * y, broadcasting", commutative=True,
            fns=("operator.mul", "torch.mul", "torch.multiply"), methods=("mul", "__mul__", "__rmul__")),
    _binary("div", "{x} / {y}", "{x} / {y}", "x / y, broadcasting; y is kept away from zero",
            other_domain="positive", fns=("operator.truediv", "torch.div", "torch.divide"),
            methods=("div", "__truediv__")),
    _binary("maximum", "torch.maximum({x}, {y})", "tl.maximum({x}, {y})", "elementwise max",
            commutative=True, fns=("torch.maximum", "torch.max"), methods=("maximum",)),
    _binary("minimum", "torch.minimum({x}, {y})", "tl.minimum({x}, {y})", "elementwise min",
            commutative=True, fns=("torch.minimum", "torch.min"), methods=("minimum",)),
)

OPERATORS = UNARY + BINARY
