"""From aten operators (what `torch.export` produces) to the vocabulary.

`match(node, values)` returns `(operator name, attrs)` for a captured node the vocabulary covers,
with the attributes named as the operator names them, or None. Attribute values are whatever the
traced program used (they need not lie in the sample spaces synthesis draws from).

Arguments arrive as captured by `drtriton.capture`: tensors as `{"value": name}`, everything else
as JSON literals, positionally as in the aten schema (kwargs merged by `_args`).
"""

from __future__ import annotations

import math

from typing import Any, Callable

from drtriton.ops.polynomials import OPERATORS as POLYNOMIALS

# aten reduction enum (at::Reduction)
_REDUCTION = {0: "none", 1: "mean", 2: "sum"}


def _is_tensor(a) -> bool:
    return isinstance(a, dict) and "value" in a


def _args(node, names: list[str], defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """The node's arguments by schema name (positional first, then keywords, then defaults)."""
    out = dict(defaults or {})
    out.update(dict(zip(names, node.args)))
    out.update(node.kwargs)
    return out


def _listify(v, n: int | None = None) -> tuple:
    if v is None:
        return ()
    if isinstance(v, (list, tuple)):
        t = tuple(v)
    else:
        t = (v,)
    if n is not None and len(t) == 1 and n > 1:
        t = t * n
    return t


def _shape(values, a) -> list[int]:
    return values[a["value"]].shape


class SymbolicSize(Exception):
    """An operator attribute (out_channels, a kernel or hidden size) would be read
    from a size the trace left symbolic: the kernel would fix it at the trace's example value
    (a weight passed to forward shares the batch's symbolic leading size). Capture traces again
    with that input's sizes static."""

    def __init__(self, message: str, index: int | None):
        super().__init__(message)
        self.index = index  # the forward argument (by position) whose sizes must be static, if one


def _fixed_shape(values, a) -> list[int]:
    """The shape of a tensor whose sizes become operator attributes: SymbolicSize when one is
    symbolic."""
    v = values[a["value"]]
    if v.symbolic:
        raise SymbolicSize(f"{v.name}'s size {v.shape[v.symbolic[0]]} along dim {v.symbolic[0]} is symbolic "
                           "where an operator fixes it", v.index if v.kind == "input" else None)
    return v.shape


# -- elementwise ------------------------------------------------------------------------------

_UNARY = {
    "aten.relu.default": "relu", "aten.sigmoid.default": "sigmoid", "aten.tanh.default": "tanh",
    "aten.silu.default": "silu", "aten.mish.default": "mish", "aten.hardswish.default": "hardswish",
    "aten.hardsigmoid.default": "hardsigmoid", "aten.selu.default": "selu", "aten.abs.default": "abs",
    **{f"aten.{name}.default": name for name in (
        "neg", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sin",
        "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "atanh", "erf", "floor", "ceil", "trunc",
        "round", "frac", "sign", "erfc", "acosh", "lgamma", "digamma", "erfinv")},
    "aten.special_erfinv.default": "erfinv", "aten.special_ndtri.default": "ndtri",
    "aten.special_erfcx.default": "erfcx", "aten.i0.default": "i0", "aten.special_i0e.default": "i0e",
    "aten.special_i1.default": "i1", "aten.special_i1e.default": "i1e",
    "aten.special_modified_bessel_i0.default": "i0", "aten.special_modified_bessel_i1.default": "i1",
    "aten.sgn.default": "sign", "aten.angle.default": "angle",
    **{f"aten.special_{name}.default": name for name in (
        "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_k0", "modified_bessel_k1",
        "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0")},
}
_BINARY = {"aten.pow.Tensor_Tensor": "pow_tensor", "aten.atan2.default": "atan2", "aten.fmod.Tensor": "fmod",
           "aten.remainder.Tensor": "remainder", "aten.copysign.Tensor": "copysign",
           "aten.hypot.default": "hypot", "aten.logaddexp.default": "logaddexp", "aten.fmax.default": "fmax",
           "aten.fmin.default": "fmin", "aten.igamma.default": "igamma", "aten.igammac.default": "igammac",
           "aten.special_zeta.default": "zeta"}
_POLYNOMIALS = [op.name for op in POLYNOMIALS]  # aten.special_<name>


def _unary(name: str) -> Callable:
    def m(node, values):
        return (name, {}) if _is_tensor(node.args[0]) else None
    return m


def _gelu(node, values):
    a = _args(node, ["input", "approximate"], {"approximate": "none"})
    return "gelu", {"approximate": a["approximate"]}


def _leaky_relu(node, values):
    a = _args(node, ["input", "negative_slope"], {"negative_slope": 0.01})
    return "leaky_relu", {"negative_slope": float(a["negative_slope"])}


def _elu(node, values):
    a = _args(node, ["input", "alpha", "scale", "input_scale"], {"alpha": 1.0, "scale": 1, "input_scale": 1})
    if a["scale"] != 1 or a["input_scale"] != 1:
        return None
    return "elu", {"alpha": float(a["alpha"])}


def _softplus(node, values):
    a = _args(node, ["input", "beta", "threshold"], {"beta": 1.0, "threshold": 20.0})
    return "softplus", {"beta": float(a["beta"]), "threshold": float(a["threshold"])}


def _hardtanh(node, values):
    a = _args(node, ["input", "min_val", "max_val"], {"min_val": -1.0, "max_val": 1.0})
    return "hardtanh", {"min_val": float(a["min_val"]), "max_val": float(a["max_val"])}


def _clamp(node, values):
    a = _args(node, ["input", "min", "max"], {"min": None, "max": None})
    if _is_tensor(a["min"]) or _is_tensor(a["max"]):
        return None
    lo = float("-inf") if a["min"] is None else float(a["min"])
    hi = float("inf") if a["max"] is None else float(a["max"])
    return "clamp", {"min": lo, "max": hi}


def _pow_scalar_base(node, values):
    """pow.Scalar (a number b to a tensor's power) is pow_tensor with b in the base's place:
    exp(x ln b) for a finite b > 0 other than 1 (1 ** nan is 1) and a floating-point result;
    PyTorch keeps the rest."""
    base = _args(node, ["input", "exponent"])["input"]
    out = values.get(node.outputs[0])
    if not isinstance(base, (int, float)) or isinstance(base, bool) or not 0 < base < math.inf or base == 1:
        return None
    return ("pow_tensor", {}) if out is not None and "float" in out.dtype else None


def _pow(node, values):
    a = _args(node, ["input", "exponent"])
    if not isinstance(a["exponent"], (int, float)):
        return None
    return "pow", {"exponent": a["exponent"]}


def _arith(tensor_op: str, scalar_op: str | None, sign: float = 1.0):
    """add/sub/mul/div with a tensor (broadcasting) or with a number."""
    def m(node, values):
        a = _args(node, ["input", "other", "alpha"], {"alpha": 1})
        x, y = a["input"], a["other"]
        if not _is_tensor(x):
            # a number first (1 - x, what rsub lowers to): the binary form, the number a literal
            ok = _is_tensor(y) and isinstance(x, (int, float)) and not isinstance(x, bool) and a["alpha"] == 1
            return (tensor_op, {}) if ok else None
        if a.get("alpha", 1) != 1:
            return None
        if _is_tensor(y):
            return tensor_op, {}
        if isinstance(y, (int, float)) and scalar_op:
            return scalar_op, {"value": sign * float(y)}
        return None
    return m


def _both_tensors(name: str):
    def m(node, values):
        return (name, {}) if _is_tensor(node.args[0]) and _is_tensor(node.args[1]) else None
    return m


def _float32_only(mapper):
    """An operator whose template reads float32 bits (nextafter): other dtypes stay PyTorch's."""
    def m(node, values):
        out = values.get(node.outputs[0])
        return mapper(node, values) if out is not None and out.dtype == "torch.float32" else None
    return m


def _tensor_and_number(name: str):
    """A binary operator whose second operand may be a number (`fmod(x, 2.0)`): the number is a
    literal of the expression, for floating-point results, or an integer one for integer results
    (index arithmetic: `(arange(3) + 1) % 3`)."""
    def m(node, values):
        x, y = node.args[:2]
        if not _is_tensor(x):
            return None
        if _is_tensor(y):
            return name, {}
        out = values.get(node.outputs[0])
        if out is None or isinstance(y, bool) or not isinstance(y, (int, float)):
            return None
        return (name, {}) if "float" in out.dtype or ("int" in out.dtype and isinstance(y, int)) else None
    return m


# -- linear algebra ---------------------------------------------------------------------------

def _linear(node, values):
    a = _args(node, ["input", "weight", "bias"], {"bias": None})
    w = _shape(values, a["weight"])  # (the template reads the features from the weight at run time)
    return "linear", {"bias": a["bias"] is not None, "out_features": w[0]}


def _einsum(node, values):
    """An einsum that is a matrix product with broadcast batch dims ("bijl,lk->bijk",
    "bmk,bkn->bmn"), or one with the second operand transposed ("bhid,bhjd->bhij", attention's
    scores: matmul with `transpose_b`). Other equations stay PyTorch."""
    a = _args(node, ["equation", "tensors"])
    eq, tensors = a["equation"], a["tensors"]
    if not isinstance(eq, str) or len(tensors) != 2 or not all(_is_tensor(t) for t in tensors) or "." in eq:
        return None
    lhs, _, out = eq.replace(" ", "").partition("->")
    x, _, y = lhs.partition(",")
    if not out or len(x) < 2 or len(y) < 2 or any(len(set(s)) != len(s) for s in (x, y, out)):
        return None
    m, c, (c2, n) = x[-2], x[-1], y[-2:]
    transposed = c2 != c and n == c  # y holds (..., n, c)
    if transposed:
        c2, n = n, c2
    batch_x, batch_y = x[:-2], y[:-2]
    batch = max(batch_x, batch_y, key=len)
    if c != c2 or c in out or len({m, c, n}) != 3 or out != batch + m + n:
        return None
    # batch letters aligned from the right, as matmul broadcasts
    if batch_x != batch[len(batch) - len(batch_x):] or batch_y != batch[len(batch) - len(batch_y):]:
        return None
    if any(len(_shape(values, t)) != len(s) for t, s in zip(tensors, (x, y))):
        return None
    return "matmul", ({"transpose_b": True} if transposed else {})


def _sdpa(node, values):
    """F.scaled_dot_product_attention: `masked_attention` when it has a mask (PyTorch refuses a
    mask with is_causal); rows the mask hides entirely give zeros, PyTorch's safe softmax."""
    a = _args(node, ["query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"],
              {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None, "enable_gqa": False})
    if a["dropout_p"] or (a["attn_mask"] is not None and a["is_causal"]):
        return None
    attrs = {"scale": float(a["scale"])} if a["scale"] is not None else {}
    if a["enable_gqa"]:
        attrs["enable_gqa"] = True
    if a["attn_mask"] is None:
        return "scaled_dot_product_attention", {"is_causal": bool(a["is_causal"]), **attrs}
    if not _is_tensor(a["attn_mask"]):
        return None
    return "masked_attention", {**attrs, "zero_empty_rows": True}


def _recurrent(name: str):
    """aten.lstm/gru/rnn_tanh/rnn_relu.input (input, hx, params, has_biases, num_layers, dropout,
    train, bidirectional, batch_first): the whole layer, when its parameters are the plain ones
    (no projection) and no dropout runs between layers."""
    def match(node, values):
        a = _args(node, ["input", "hx", "params", "has_biases", "num_layers", "dropout", "train", "bidirectional",
                         "batch_first"])
        params, layers, directions = a["params"], int(a["num_layers"]), 2 if a["bidirectional"] else 1
        if (a["dropout"] and a["train"] and layers > 1) or not all(_is_tensor(p) for p in params):
            return None
        if len(params) != (4 if a["has_biases"] else 2) * directions * layers:  # proj_size adds weight_hr
            return None
        hidden = _fixed_shape(values, params[1])[1]  # weight_hh_l0: (gates x hidden, hidden)
        return name, {"hidden_size": hidden, "num_layers": layers, "bidirectional": directions == 2,
                      "batch_first": bool(a["batch_first"]), "bias": bool(a["has_biases"])}
    return match


# -- convolution and pooling ------------------------------------------------------------------

_CONV_DEFAULTS = {"bias": None, "stride": 1, "padding": 0, "dilation": 1, "groups": 1, "output_padding": 0}


def _conv_attrs(a: dict, values, n: int, transposed: bool) -> dict | None:
    """The vocabulary's convolution attributes from the arguments by name."""
    if isinstance(a["padding"], str):  # "same"/"valid": PyTorch lowers them to aten.convolution
        return None
    w = _fixed_shape(values, a["weight"])
    groups = int(a["groups"])
    attrs = {
        "kernel_size": tuple(w[2:]), "stride": _listify(a["stride"], n),
        "padding": _listify(a["padding"], n), "dilation": _listify(a["dilation"], n),
        "groups": groups, "bias": a["bias"] is not None,
        "out_channels": w[1] * groups if transposed else w[0],
    }
    if transposed:
        attrs["output_padding"] = _listify(a["output_padding"], n)
    return attrs


def _conv(name: str, n: int, transposed: bool):
    names = (["input", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"]
             if transposed else ["input", "weight", "bias", "stride", "padding", "dilation", "groups"])

    def m(node, values):
        attrs = _conv_attrs(_args(node, names, _CONV_DEFAULTS), values, n, transposed)
        return None if attrs is None else (name, attrs)
    return m


def _convolution(node, values):
    """aten.convolution (what `padding="same"` and other spellings lower to): the vocabulary's
    conv{n}d or conv_transpose{n}d by the weight's rank and the `transposed` flag."""
    a = _args(node, ["input", "weight", "bias", "stride", "padding", "dilation", "transposed", "output_padding",
                     "groups"], _CONV_DEFAULTS)
    n = len(_shape(values, a["weight"])) - 2
    transposed = bool(a["transposed"])
    if n not in (1, 2, 3) or len(_shape(values, a["input"])) != n + 2:
        return None
    if not transposed and any(int(p) for p in _listify(a["output_padding"], n)):
        return None
    attrs = _conv_attrs(a, values, n, transposed)
    return None if attrs is None else (f"conv_transpose{n}d" if transposed else f"conv{n}d", attrs)


def _max_pool(name: str, n: int):
    def m(node, values):
        a = _args(node, ["input", "kernel_size", "stride", "padding", "dilation", "ceil_mode"],
                  {"stride": [], "padding": 0, "dilation": 1, "ceil_mode": False})
        k = _listify(a["kernel_size"], n)
        return name, {"kernel_size": k, "stride": _listify(a["stride"], n) or k,
                      "padding": _listify(a["padding"], n), "dilation": _listify(a["dilation"], n),
                      "ceil_mode": bool(a["ceil_mode"])}
    return m


def _avg_pool(name: str, n: int):
    def m(node, values):
        a = _args(node, ["input", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                         "divisor_override"],
                  {"stride": [], "padding": 0, "ceil_mode": False, "count_include_pad": True,
                   "divisor_override": None})
        k = _listify(a["kernel_size"], n)
        attrs = {"kernel_size": k, "stride": _listify(a["stride"], n) or k,
                 "padding": _listify(a["padding"], n), "ceil_mode": bool(a["ceil_mode"]),
                 "count_include_pad": bool(a["count_include_pad"])}
        if a["divisor_override"] is not None:  # every window's sum divided by this (not its size)
            attrs["divisor_override"] = int(a["divisor_override"])
        return name, attrs
    return m


def _adaptive_avg(name: str, n: int):
    def m(node, values):
        a = _args(node, ["input", "output_size"])
        return name, {"output_size": _listify(a["output_size"], n)}
    return m


# -- normalisation ----------------------------------------------------------------------------

def _batch_norm(node, values):
    a = _args(node, ["input", "weight", "bias", "running_mean", "running_var", "training", "momentum",
                     "eps", "cudnn_enabled"], {"weight": None, "bias": None, "momentum": 0.1, "eps": 1e-5})
    return "batch_norm", {"training": bool(a["training"]), "eps": float(a["eps"]),
                          "affine": a["weight"] is not None, "momentum": a["momentum"],
                          "running_stats": a["running_mean"] is not None}


def _batch_norm_inference(node, values):
    """What lowering respells an eval-mode batch_norm as: the result is its output 0."""
    a = _args(node, ["input", "weight", "bias", "running_mean", "running_var", "momentum", "eps"])
    return "batch_norm", {"training": False, "eps": float(a["eps"]), "affine": a["weight"] is not None,
                          "momentum": a["momentum"], "running_stats": True}


def _instance_norm(node, values):
    a = _args(node, ["input", "weight", "bias", "running_mean", "running_var", "use_input_stats",
                     "momentum", "eps", "cudnn_enabled"], {"weight": None, "bias": None, "eps": 1e-5})
    if not a["use_input_stats"]:
        return None
    return "instance_norm", {"eps": float(a["eps"]), "affine": a["weight"] is not None, "has_bias": a["bias"] is not None}


def _group_norm(node, values):
    a = _args(node, ["input", "num_groups", "weight", "bias", "eps", "cudnn_enabled"],
              {"weight": None, "bias": None, "eps": 1e-5})
    return "group_norm", {"num_groups": int(a["num_groups"]), "eps": float(a["eps"]),
                          "affine": a["weight"] is not None, "has_bias": a["bias"] is not None}


def _layer_norm(node, values):
    a = _args(node, ["input", "normalized_shape", "weight", "bias", "eps", "cudnn_enable"],
              {"weight": None, "bias": None, "eps": 1e-5})
    return "layer_norm", {"normalized_dims": len(_listify(a["normalized_shape"])), "eps": float(a["eps"]),
                          "affine": a["weight"] is not None, "has_bias": a["bias"] is not None}


def _rms_norm(node, values):
    a = _args(node, ["input", "normalized_shape", "weight", "eps"], {"weight": None, "eps": None})
    return "rms_norm", {"normalized_dims": len(_listify(a["normalized_shape"])), "eps": a["eps"],
                        "affine": a["weight"] is not None}


def _softmax(name: str, dtype_arg: str = "dtype"):
    """softmax(x, dim, dtype) or, lowered, _softmax(x, dim, half_to_float)."""
    def m(node, values):
        a = _args(node, ["input", "dim", dtype_arg], {dtype_arg: None})
        as_is = a[dtype_arg] in (None, False) or a[dtype_arg] == values[a["input"]["value"]].dtype
        if not as_is:  # a softmax that changes the dtype
            return None
        rank = len(_shape(values, a["input"]))
        return name, {"dim": int(a["dim"]) % max(rank, 1)}
    return m


# -- reductions and scans ---------------------------------------------------------------------

def _dims(a, values) -> tuple[int, ...] | None:
    rank = len(_shape(values, a["input"]))
    dim = a.get("dim")
    if dim is None or dim == []:
        return tuple(range(rank))
    return tuple(sorted({int(d) % max(rank, 1) for d in _listify(dim)}))


def _reduce(name: str, single_axis: bool = False):
    def m(node, values):
        a = _args(node, ["input", "dim", "keepdim", "dtype"], {"dim": None, "keepdim": False, "dtype": None})
        if a.get("dtype") is not None:
            return None
        dims = _dims(a, values)
        if single_axis and a["dim"] is None:
            if name not in ("argmax", "argmin"):
                return None
            # argmax(x) without dim: the index into x flattened, i.e. over every axis (adjacent,
            # so the rows template's reduced block is all of x and its index the flat one)
            return name, {"dim": dims, "keepdim": bool(a["keepdim"])}
        return name, {"dim": dims[0] if single_axis else dims, "keepdim": bool(a["keepdim"])}
    return m


def _variance(name: str):
    """var / std over axes with Bessel's `correction` (var.correction, var.dim's `unbiased`)."""
    def m(node, values):
        if node.target.endswith(".dim"):  # var.dim(input, dim, unbiased=True, keepdim=False)
            a = _args(node, ["input", "dim", "unbiased", "keepdim"], {"dim": None, "unbiased": True, "keepdim": False})
            correction = 1.0 if a["unbiased"] else 0.0
        else:  # var.correction(input, dim=None, *, correction=None, keepdim=False)
            a = _args(node, ["input", "dim"], {"dim": None, "correction": None, "keepdim": False})
            correction = 1.0 if a["correction"] is None else float(a["correction"])
        return name, {"dim": _dims(a, values), "correction": correction, "keepdim": bool(a["keepdim"])}
    return m


def _vector_norm(node, values):
    a = _args(node, ["input", "ord", "dim", "keepdim", "dtype"], {"ord": 2, "dim": None, "keepdim": False,
                                                                  "dtype": None})
    if a["ord"] not in (1, 2, 1.0, 2.0) or a["dtype"] is not None:
        return None
    return "norm", {"p": int(a["ord"]), "dim": _dims(a, values), "keepdim": bool(a["keepdim"])}


def _scan(name: str):
    def m(node, values):
        a = _args(node, ["input", "dim", "dtype"], {"dtype": None})
        if a["dtype"] is not None:
            return None
        return name, {"dim": int(a["dim"]) % max(len(_shape(values, a["input"])), 1)}
    return m


# -- order statistics (drtriton.policy.emit.sort); argsort and msort lower to sort ----------------

def _axis_of(values, a) -> int:
    return int(a["dim"]) % max(len(_shape(values, a["input"])), 1)


def _sort(node, values):
    """sort.default(x, dim, descending) and sort.stable(x, *, stable, dim, descending)."""
    a = _args(node, ["input", "dim", "descending"], {"dim": -1, "descending": False, "stable": False})
    if not _is_tensor(a["input"]):
        return None
    return "sort", {"dim": _axis_of(values, a), "descending": bool(a["descending"]), "stable": bool(a["stable"])}


def _topk(node, values):
    """topk(x, k, dim, largest, sorted): sorted=False leaves the order to the kernel PyTorch picks."""
    a = _args(node, ["input", "k", "dim", "largest", "sorted"], {"dim": -1, "largest": True, "sorted": True})
    if not a["sorted"] or not isinstance(a["k"], int) or isinstance(a["k"], bool):
        return None
    return "topk", {"k": a["k"], "dim": _axis_of(values, a), "largest": bool(a["largest"])}


def _kthvalue(node, values):
    a = _args(node, ["input", "k", "dim", "keepdim"], {"dim": -1, "keepdim": False})
    if not isinstance(a["k"], int) or isinstance(a["k"], bool):
        return None
    return "kthvalue", {"k": a["k"], "dim": _axis_of(values, a), "keepdim": bool(a["keepdim"])}


def _median(name: str):
    """median / nanmedian: .dim (values and indices) or .default (of all elements, a 0-d value)."""
    def m(node, values):
        if node.target.endswith(".default"):
            return name, {"dim": None, "keepdim": False}
        a = _args(node, ["input", "dim", "keepdim"], {"keepdim": False})
        return name, {"dim": _axis_of(values, a), "keepdim": bool(a["keepdim"])}
    return m


def _mode(node, values):
    a = _args(node, ["input", "dim", "keepdim"], {"dim": -1, "keepdim": False})
    return "mode", {"dim": _axis_of(values, a), "keepdim": bool(a["keepdim"])}


# -- small dense linear algebra (drtriton.policy.emit.factorization) ---------------------------

def _flag(name: str, default: bool):
    return lambda a: bool(a.get(name, default))


def _linalg(name: str, schema: list[str], defaults: dict, attrs: dict | None = None,
            require: dict | None = None) -> Callable:
    """An aten linear-algebra operator onto `name`: `attrs` maps attribute names to functions
    of the arguments; `require` lists arguments that must hold a value (pivot=True)."""
    def m(node, values):
        a = _args(node, schema, defaults)
        if any(a.get(k) != v for k, v in (require or {}).items()):
            return None
        return name, {k: f(a) for k, f in (attrs or {}).items()}
    return m


_UPPER_ARG = {"upper": _flag("upper", False)}
_LINALG = {
    "aten.linalg_lu_factor_ex.default": _linalg("lu_factor", ["A", "pivot", "check_errors"], {"pivot": True},
                                                require={"pivot": True}),
    "aten.linalg_lu_factor.default": _linalg("lu_factor", ["A", "pivot"], {"pivot": True}, require={"pivot": True}),
    "aten.linalg_lu.default": _linalg("lu", ["A", "pivot"], {"pivot": True}, require={"pivot": True}),
    "aten.lu_unpack.default": _linalg("lu_unpack", ["LU", "pivots", "unpack_data", "unpack_pivots"],
                                      {"unpack_data": True, "unpack_pivots": True},
                                      require={"unpack_data": True, "unpack_pivots": True}),
    "aten.linalg_lu_solve.default": _linalg("lu_solve", ["LU", "pivots", "B", "left", "adjoint"],
                                            {"left": True, "adjoint": False},
                                            {"left": _flag("left", True), "adjoint": _flag("adjoint", False)}),
    "aten._linalg_det.default": _linalg("det", ["A"], {}),
    "aten.linalg_det.default": _linalg("det", ["A"], {}),
    "aten.det.default": _linalg("det", ["A"], {}),
    "aten._linalg_slogdet.default": _linalg("slogdet", ["A"], {}),
    "aten.linalg_inv.default": _linalg("inv", ["A"], {}),
    "aten.linalg_inv_ex.default": _linalg("inv", ["A", "check_errors"], {}),
    "aten.inverse.default": _linalg("inv", ["A"], {}),
    "aten.linalg_tensorinv.default": _linalg("inv", ["A", "ind"], {"ind": 2}, {"ind": lambda a: int(a["ind"])}),
    "aten.linalg_solve.default": _linalg("solve", ["A", "B", "left"], {"left": True}, {"left": _flag("left", True)}),
    "aten._linalg_solve_ex.default": _linalg("solve", ["A", "B", "left", "check_errors"], {"left": True},
                                             {"left": _flag("left", True)}),
    "aten.linalg_solve_ex.default": _linalg("solve", ["A", "B", "left", "check_errors"], {"left": True},
                                            {"left": _flag("left", True)}),
    "aten.cholesky.default": _linalg("cholesky", ["A", "upper"], {}, _UPPER_ARG),
    "aten.linalg_cholesky.default": _linalg("cholesky", ["A", "upper"], {}, _UPPER_ARG),
    "aten.linalg_cholesky_ex.default": _linalg("cholesky", ["A", "upper", "check_errors"], {}, _UPPER_ARG),
    "aten.cholesky_solve.default": _linalg("cholesky_solve", ["B", "L", "upper"], {}, _UPPER_ARG),
    "aten.cholesky_inverse.default": _linalg("cholesky_inverse", ["L", "upper"], {}, _UPPER_ARG),
    "aten.linalg_solve_triangular.default": _linalg(
        "solve_triangular", ["A", "B"], {}, {"upper": _flag("upper", False), "left": _flag("left", True),
                                             "unitriangular": _flag("unitriangular", False)}),
    "aten.triangular_solve.default": _linalg(
        "triangular_solve", ["B", "A", "upper", "transpose", "unitriangular"], {},
        {"upper": _flag("upper", True), "transpose": _flag("transpose", False),
         "unitriangular": _flag("unitriangular", False)}),
    # what eigh / eigvalsh and svd / svdvals (pinv, matrix_rank, cond, the nuclear norm) lower to
    "aten._linalg_eigh.default": _linalg("eigh", ["A", "UPLO", "compute_v"], {"UPLO": "L", "compute_v": True},
                                         {"upper": lambda a: a["UPLO"] == "U"}),
    "aten.linalg_qr.default": _linalg("qr", ["A", "mode"], {"mode": "reduced"}, {"mode": lambda a: str(a["mode"])}),
    "aten._linalg_svd.default": _linalg("svd", ["A", "full_matrices", "compute_uv", "driver"],
                                        {"full_matrices": False, "compute_uv": True, "driver": None},
                                        {"full_matrices": _flag("full_matrices", False)}),
}


# -- losses -----------------------------------------------------------------------------------

def _pointwise_loss(name: str, extra: list[str], defaults: dict):
    def m(node, values):
        a = _args(node, ["input", "target", "reduction"] + extra, {"reduction": 1, **defaults})
        if _shape(values, a["input"]) != _shape(values, a["target"]):
            return None
        attrs = {"reduction": _REDUCTION[int(a["reduction"])]}
        attrs.update({k: a[k] for k in extra})
        return name, attrs
    return m


def _kl_div(node, values):
    a = _args(node, ["input", "target", "reduction", "log_target"], {"reduction": 1, "log_target": False})
    if a["log_target"]:
        return None
    return "kl_div", {"reduction": _REDUCTION[int(a["reduction"])]}


def _cross_entropy(node, values):
    a = _args(node, ["input", "target", "weight", "reduction", "ignore_index", "label_smoothing"],
              {"weight": None, "reduction": 1, "ignore_index": -100, "label_smoothing": 0.0})
    if a["weight"] is not None or a["label_smoothing"]:
        return None
    return "cross_entropy", {"reduction": _REDUCTION[int(a["reduction"])], "ignore_index": int(a["ignore_index"])}


def _triplet(node, values):
    a = _args(node, ["anchor", "positive", "negative", "margin", "p", "eps", "swap", "reduction"],
              {"margin": 1.0, "p": 2.0, "eps": 1e-6, "swap": False, "reduction": 1})
    if a["p"] != 2 or a["swap"]:
        return None
    return "triplet_margin_loss", {"margin": float(a["margin"]), "eps": float(a["eps"]),
                                   "reduction": _REDUCTION[int(a["reduction"])]}


def _compare(name: str):
    """eq.Tensor(x, y) and eq.Scalar(x, 2.0): the tensor first (the scalar becomes a literal)."""
    def m(node, values):
        return (name, {}) if _is_tensor(node.args[0]) and isinstance(node.args[1], (dict, int, float, bool)) else None
    return m


def _where(node, values):
    """where.self and its scalar forms (ScalarSelf/ScalarOther/Scalar: literals in the kernel)."""
    a = _args(node, ["condition", "input", "other"])
    if not _is_tensor(a["condition"]) or values[a["condition"]["value"]].dtype != "torch.bool":
        return None
    if not all(_is_tensor(v) or isinstance(v, (int, float, bool)) for v in (a["input"], a["other"])):
        return None
    return "where", {}


_TO_POSITIONAL = {"aten.to.dtype": ["input", "dtype"], "prims.convert_element_type.default": ["input", "dtype"],
                  "aten.to.device": ["input", "device", "dtype"]}


def _to_dtype(node, values):
    """A dtype conversion on the same device (`x.to(torch.float32)`, `_to_copy(x, dtype=...)`,
    `x.float()`, `mask.to(x.device, torch.bool)`, `x.to(dtype=..., device=x.device)` as
    transformers writes its masks), not a move or a layout change."""
    a = _args(node, _TO_POSITIONAL.get(node.target, ["input"]))
    dtype = a.get("dtype")
    extra = set(node.kwargs) - {"dtype", "layout", "device", "pin_memory", "memory_format", "non_blocking", "copy"}
    if not _is_tensor(a["input"]) or not isinstance(dtype, str) or extra:
        return None
    if node.kwargs.get("memory_format") not in (None, "torch.preserve_format") or \
            node.kwargs.get("layout") not in (None, "torch.strided"):
        return None
    name = dtype.removeprefix("torch.")
    from .elementwise import _TL_DTYPES
    return ("to_dtype", {"dtype": name}) if name in _TL_DTYPES else None


def _bits(name: str):
    """bitwise and/or/xor/not: the logical operator on booleans, the bitwise one on integers (a
    number operand an integer literal of the expression: `x & 1`)."""
    def m(node, values):
        tensors = [a for a in node.args if _is_tensor(a)]
        dtypes = {values[t["value"]].dtype for t in tensors}
        if dtypes == {"torch.bool"} and len(tensors) == len(node.args):
            return f"logical_{name}", {}
        numbers = [a for a in node.args if not _is_tensor(a)]
        if (tensors and _is_tensor(node.args[0]) and all("int" in d for d in dtypes)
                and all(isinstance(a, int) and not isinstance(a, bool) for a in numbers)):
            return f"bitwise_{name}", {}
        return None
    return m


# -- indexing and data movement ------------------------------------------------------------

def _joined(name: str):
    """cat / stack of a list of tensors along `dim`."""
    def m(node, values):
        a = _args(node, ["tensors", "dim"], {"dim": 0})
        tensors = a["tensors"]
        if not isinstance(tensors, list) or not tensors or not all(_is_tensor(t) for t in tensors):
            return None
        rank = len(_shape(values, tensors[0])) + (name == "stack")
        return name, {"dim": int(a["dim"]) % max(rank, 1)}
    return m


def _flip(node, values):
    a = _args(node, ["input", "dims"])
    rank = len(_shape(values, a["input"]))
    return "flip", {"dims": tuple(sorted({int(d) % max(rank, 1) for d in _listify(a["dims"])}))}


def _indexed(name: str):
    """index_select(x, dim, index) and gather(x, dim, index)."""
    def m(node, values):
        a = _args(node, ["input", "dim", "index"])
        if not (_is_tensor(a["input"]) and _is_tensor(a["index"])) or node.kwargs.get("sparse_grad"):
            return None
        return name, {"dim": int(a["dim"]) % max(len(_shape(values, a["input"])), 1)}
    return m


def _bucketize(node, values):
    a = _args(node, ["input", "boundaries", "out_int32", "right"], {"out_int32": False, "right": False})
    if not (_is_tensor(a["input"]) and _is_tensor(a["boundaries"])):
        return None
    return "bucketize", {"out_int32": bool(a["out_int32"]), "right": bool(a["right"])}


def _searchsorted(node, values):
    """searchsorted over one sorted row, without a sorter: bucketize with the operands swapped
    (`ARGS_ORDER`); `side="right"` is `right=True`."""
    a = _args(node, ["sorted_sequence", "input", "out_int32", "right", "side", "sorter"],
              {"out_int32": False, "right": False, "side": None, "sorter": None})
    seq, x = a["sorted_sequence"], a["input"]
    if not (_is_tensor(seq) and _is_tensor(x)) or a["sorter"] is not None or len(_shape(values, seq)) != 1:
        return None
    return "bucketize", {"out_int32": bool(a["out_int32"]), "right": bool(a["right"]) or a["side"] == "right"}


def _advanced_index(node, values):
    """x[i, :, j]: index tensors (integers, not masks) on some axes, full slices (None) between."""
    a = _args(node, ["input", "indices"])
    indices = a["indices"]
    if not _is_tensor(a["input"]) or not isinstance(indices, list) or not any(_is_tensor(i) for i in indices):
        return None
    if any(i is not None and (not _is_tensor(i) or values[i["value"]].dtype not in ("torch.int64", "torch.int32"))
           for i in indices):
        return None  # boolean masks select a data-dependent number of elements
    return "index", {}


def _constant_pad(node, values):
    a = _args(node, ["input", "pad", "value"], {"value": 0})
    if not isinstance(a["value"], (int, float)) or not all(isinstance(p, int) for p in a["pad"]):
        return None  # symbolic pads: sizes from forward
    return "constant_pad", {"pad": tuple(a["pad"]), "value": float(a["value"])}


def _embedding(node, values):
    a = _args(node, ["weight", "indices"])
    return ("embedding", {}) if len(_shape(values, a["weight"])) == 2 and _is_tensor(a["indices"]) else None


#: an empty segment's value where no initial is given (aten.segment_reduce's)
_EMPTY_SEGMENT = {"sum": 0.0, "mean": math.nan, "max": -math.inf, "min": math.inf, "prod": 1.0}


def _segment_reduce(node, values):
    """torch.segment_reduce with lengths or offsets (not the deprecated indices), any axis, an
    optional initial value (it starts every segment's reduction: an empty segment is it)."""
    a = _args(node, ["data", "reduce"], {"lengths": None, "indices": None, "offsets": None, "axis": 0,
                                         "unsafe": False, "initial": None})
    bounds = a["offsets"] if a["lengths"] is None else a["lengths"]
    reduce, initial = a["reduce"], a["initial"]
    if not (_is_tensor(a["data"]) and _is_tensor(bounds)) or a["indices"] is not None or reduce not in _EMPTY_SEGMENT:
        return None
    if initial is not None and not isinstance(initial, (int, float)):
        return None
    rank = len(_shape(values, a["data"]))
    if len(_shape(values, bounds)) != int(a["axis"]) % rank + 1:
        return None  # (bounds per row of the axes before: PyTorch's layout)
    initial = None if initial is None else float(initial)
    return "segment_reduce", {"reduce": reduce, "initial": initial, "axis": int(a["axis"]) % rank,
                              "empty": _EMPTY_SEGMENT[reduce] if initial is None else initial,
                              "offsets_end": a["lengths"] is None, "padding_idx": None}


def _embedding_bag(node, values):
    """nn.EmbeddingBag (F.embedding_bag): each bag's rows read from the table through the indices,
    summed, averaged or maxed (an empty bag is 0); rows at padding_idx left out, counts too. Its
    max keeps a value only where a later one is greater: a NaN counts only as a bag's first row
    (`nan_first`)."""
    a = _args(node, ["weight", "indices", "offsets", "scale_grad_by_freq", "mode", "sparse",
                     "per_sample_weights", "include_last_offset", "padding_idx"],
              {"mode": 0, "per_sample_weights": None, "include_last_offset": False, "padding_idx": -1})
    if not all(_is_tensor(a[k]) for k in ("weight", "indices", "offsets")) or a["mode"] not in (0, 1, 2):
        return None
    if len(_shape(values, a["weight"])) != 2 or len(_shape(values, a["indices"])) != 1:
        return None
    padding = a["padding_idx"]
    return "segment_reduce", {"reduce": ("sum", "mean", "max")[a["mode"]], "initial": None, "axis": 0, "empty": 0.0,
                              "offsets_end": bool(a["include_last_offset"]), "nan_first": a["mode"] == 2,
                              "padding_idx": padding if isinstance(padding, int) and padding >= 0 else None}


def _grouped_mm(node, values):
    """transformers' grouped_mm_fallback (mixture-of-experts layers in float32): (M, K) rows sorted by
    expert, (E, K, N) weights, (E,) cumulative row counts."""
    a = _args(node, ["input", "weight", "offs"])
    if not all(_is_tensor(a[k]) for k in ("input", "weight", "offs")):
        return None
    if [len(_shape(values, a[k])) for k in ("input", "weight", "offs")] != [2, 3, 1]:
        return None
    return "grouped_mm", {}


# -- the store side: scatter and index_put (drtriton.policy.emit.scatter) ----------------------

#: scatter_reduce's names for its reductions, and scatter(reduce=...)'s older ones
_SCATTER_REDUCE = {"sum": "sum", "prod": "prod", "mean": "mean", "amax": "amax", "amin": "amin",
                   "add": "sum", "multiply": "prod"}


def _scatter(node, values):
    """scatter.src / scatter.value (a number stored), scatter.reduce / scatter.value_reduce (the
    older add / multiply), scatter_add, scatter_reduce.two (with include_self)."""
    a = _args(node, ["input", "dim", "index", "src", "reduce"], {"reduce": None, "include_self": True})
    if not (_is_tensor(a["input"]) and _is_tensor(a["index"])):
        return None
    src = a["src"]
    if not _is_tensor(src) and (isinstance(src, bool) or not isinstance(src, (int, float))):
        return None
    if values[a["index"]["value"]].dtype not in ("torch.int64", "torch.int32"):
        return None
    if node.target == "aten.scatter_add.default":
        reduce = "sum"
    elif a["reduce"] is None:
        reduce = "none"
    else:
        reduce = _SCATTER_REDUCE.get(a["reduce"])
        if reduce is None:
            return None
    rank = len(_shape(values, a["input"]))
    return "scatter", {"dim": int(a["dim"]) % max(rank, 1), "reduce": reduce,
                       "include_self": bool(a["include_self"])}


def _index_put(node, values):
    """index_put(x, indices, values, accumulate): integer index tensors on some axes, None (a full
    slice) on others; boolean masks select a data-dependent set, left to PyTorch."""
    a = _args(node, ["input", "indices", "values", "accumulate"], {"accumulate": False})
    indices = a["indices"]
    if not _is_tensor(a["input"]) or not isinstance(indices, list) or not any(_is_tensor(i) for i in indices):
        return None
    if any(i is not None and (not _is_tensor(i) or values[i["value"]].dtype not in ("torch.int64", "torch.int32"))
           for i in indices):
        return None
    if not (_is_tensor(a["values"]) or isinstance(a["values"], (int, float))):
        return None
    return "index_put", {"accumulate": bool(a["accumulate"])}


# -- prims: what PyTorch's reference decompositions (torch._refs, in torch._decomp's table, which
# capture uses for Core ATen operators export keeps) lower to. The same operations as their aten
# namesakes, with plain positional arguments (a number may stand for a tensor).

def _prims_div(node, values):
    """prims.div: true division for floating-point results (the vocabulary's div), truncation
    toward zero for integer ones (div_trunc: what `i // 3` and rounding modes lower to)."""
    out = values.get(node.outputs[0])
    if out is not None and "float" in out.dtype:
        return _arith("div", "div_scalar")(node, values)
    if out is not None and "int" in out.dtype:
        return _tensor_and_number("div_trunc")(node, values)
    return None


#: aten operators whose arguments capture reorders once matched: elementwise templates read their
#: operands positionally (x first), and polygamma(n, x) puts its order first
ARGS_ORDER = {"aten.polygamma.default": (1, 0), "aten.searchsorted.Tensor": (1, 0)}


def _polygamma(node, values):
    """polygamma(n, x): digamma for n = 0, the vocabulary's polygamma of order n above."""
    n, x = node.args[:2]
    if not _is_tensor(x) or isinstance(n, bool) or not isinstance(n, int) or n < 0:
        return None
    return ("digamma", {}) if n == 0 else ("polygamma", {"n": n})


def _prims_pow(node, values):
    a = _args(node, ["input", "exponent"])
    if _is_tensor(a["input"]) and _is_tensor(a["exponent"]):
        return "pow_tensor", {}
    return _pow(node, values) if _is_tensor(a["input"]) else _pow_scalar_base(node, values)


def _prims_reduce(name: str):
    """prims.sum / prod / amax / amin / var (inp, dims, [correction]): no keepdim, no dtype."""
    def m(node, values):
        a = _args(node, ["input", "dim", "correction"], {"dim": None, "correction": 1.0, "output_dtype": None})
        if a["output_dtype"] is not None or a["dim"] == []:  # prims' [] reduces no axis
            return None
        dims = _dims(a, values)
        attrs = {"dim": dims, "keepdim": False}
        if name in ("max", "min", "prod"):  # single-axis operators: one axis, or all of them (adjacent)
            attrs["dim"] = dims[0] if len(dims) == 1 else dims
        if name == "var":
            attrs["correction"] = float(a["correction"])
        return name, attrs
    return m


_PRIMS_SAME = {  # prims.X.default -> the matcher of aten.X
    **{f"prims.{n}.default": _unary(v) for n, v in (
        (k.split(".")[1], v) for k, v in _UNARY.items()) if n not in ("sgn",)},
    "prims.tanh.default": _unary("tanh"), "prims.abs.default": _unary("abs"),
    "prims.erf_inv.default": _unary("erfinv"), "prims.erfcx.default": _unary("erfcx"),
    "prims.bessel_i0.default": _unary("i0"), "prims.bessel_i0e.default": _unary("i0e"),
    "prims.bessel_i1.default": _unary("i1"), "prims.bessel_i1e.default": _unary("i1e"),
    "prims.bessel_j0.default": _unary("bessel_j0"), "prims.bessel_j1.default": _unary("bessel_j1"),
    "prims.spherical_bessel_j0.default": _unary("spherical_bessel_j0"),
    **{f"prims.{n}.default": _both_tensors(v) for n, v in (
        ("atan2", "atan2"), ("hypot", "hypot"), ("fmax", "fmax"),
        ("fmin", "fmin"), ("maximum", "maximum"), ("minimum", "minimum"))},
    "prims.fmod.default": _tensor_and_number("fmod"), "prims.remainder.default": _tensor_and_number("remainder"),
    "prims.add.default": _arith("add", "add_scalar"), "prims.sub.default": _arith("sub", "add_scalar", sign=-1.0),
    "prims.mul.default": _arith("mul", "mul_scalar"), "prims.div.default": _prims_div,
    "prims.pow.default": _prims_pow,
    **{f"prims.{c}.default": _compare(c) for c in ("eq", "ne", "lt", "le", "gt", "ge")},
    "prims.where.default": _where, "prims.signbit.default": _unary("signbit"),
    "prims.convert_element_type.default": _to_dtype,
    "prims.sum.default": _prims_reduce("sum"), "prims.prod.default": _prims_reduce("prod"),
    "prims.amax.default": _prims_reduce("max"), "prims.amin.default": _prims_reduce("min"),
    "prims.var.default": _prims_reduce("var"),
}


MATCHERS: dict[str, Callable] = {
    "aten.cat.default": _joined("cat"), "aten.stack.default": _joined("stack"), "aten.flip.default": _flip,
    "aten.bucketize.Tensor": _bucketize, "aten.searchsorted.Tensor": _searchsorted,
    "aten.index_select.default": _indexed("index_select"), "aten.gather.default": _indexed("gather"),
    "aten.embedding.default": _embedding,
    "aten.segment_reduce.default": _segment_reduce, "aten._embedding_bag.default": _embedding_bag,
    "aten._embedding_bag_forward_only.default": _embedding_bag,
    "transformers.grouped_mm_fallback.default": _grouped_mm,
    "aten.constant_pad_nd.default": _constant_pad,
    "aten.index.Tensor": _advanced_index, "aten._unsafe_index.Tensor": _advanced_index,
    "aten.scatter.src": _scatter, "aten.scatter.value": _scatter, "aten.scatter.reduce": _scatter,
    "aten.scatter.value_reduce": _scatter, "aten.scatter_add.default": _scatter,
    "aten.scatter_reduce.two": _scatter,
    "aten.index_put.default": _index_put, "aten._unsafe_index_put.default": _index_put,
    **{f"aten.{c}.{form}": _compare(c) for c in ("eq", "ne", "lt", "le", "gt", "ge") for form in ("Tensor", "Scalar")},
    "aten.where.self": _where, "aten.where.ScalarSelf": _where, "aten.where.ScalarOther": _where,
    "aten.where.Scalar": _where,
    "aten._to_copy.default": _to_dtype, "aten.to.dtype": _to_dtype, "aten.to.device": _to_dtype,
    "aten.to.dtype_layout": _to_dtype,
    "aten.logical_not.default": _unary("logical_not"), "aten.logical_and.default": _both_tensors("logical_and"),
    "aten.logical_or.default": _both_tensors("logical_or"), "aten.logical_xor.default": _both_tensors("logical_xor"),
    **{f"{ns}.{op}.{form}": _bits(op.strip("_").removeprefix("bitwise_")) for ns, op, form in (
        ("aten", "bitwise_and", "Tensor"), ("aten", "bitwise_or", "Tensor"), ("aten", "bitwise_xor", "Tensor"),
        ("aten", "bitwise_and", "Scalar"), ("aten", "bitwise_or", "Scalar"), ("aten", "bitwise_xor", "Scalar"),
        ("aten", "bitwise_not", "default"), ("aten", "__and__", "Tensor"), ("aten", "__or__", "Tensor"),
        ("aten", "__xor__", "Tensor"), ("prims", "bitwise_and", "default"), ("prims", "bitwise_or", "default"),
        ("prims", "bitwise_xor", "default"), ("prims", "bitwise_not", "default"))},
    "aten.isnan.default": _unary("isnan"), "aten.isinf.default": _unary("isinf"),
    "aten.isfinite.default": _unary("isfinite"),
    **{target: _unary(name) for target, name in _UNARY.items()},
    **{target: _both_tensors(name) for target, name in _BINARY.items()},
    "aten.special_zeta.other_scalar": _tensor_and_number("zeta"), "aten.polygamma.default": _polygamma,
    "aten.nextafter.default": _float32_only(_both_tensors("nextafter")),
    # orthogonal polynomials: the degree a tensor, or a number (`chebyshev_polynomial_t(x, 3)`)
    **{f"aten.special_{name}.{overload}": _tensor_and_number(name) for name in _POLYNOMIALS
       for overload in ("default", "n_scalar")},
    "aten.fmod.Scalar": _tensor_and_number("fmod"), "aten.remainder.Scalar": _tensor_and_number("remainder"),
    "aten.gelu.default": _gelu,
    "aten.leaky_relu.default": _leaky_relu,
    "aten.elu.default": _elu,
    "aten.softplus.default": _softplus,
    "aten.hardtanh.default": _hardtanh,
    "aten.clamp.default": _clamp,
    "aten.pow.Tensor_Scalar": _pow, "aten.pow.Scalar": _pow_scalar_base,
    "aten.add.Tensor": _arith("add", "add_scalar"),
    "aten.sub.Tensor": _arith("sub", "add_scalar", sign=-1.0),
    "aten.mul.Tensor": _arith("mul", "mul_scalar"),
    "aten.multiply.Tensor": _arith("mul", "mul_scalar"),
    "aten.div.Tensor": _arith("div", "div_scalar"),
    "aten.maximum.default": _both_tensors("maximum"),
    "aten.minimum.default": _both_tensors("minimum"),
    "aten.max.other": _both_tensors("maximum"),
    "aten.min.other": _both_tensors("minimum"),
    "aten.matmul.default": lambda n, v: ("matmul", {}),
    "aten.mm.default": lambda n, v: ("matmul", {}),
    "aten.bmm.default": lambda n, v: ("bmm", {}),
    "aten.einsum.default": _einsum,
    "aten.linear.default": _linear,
    "aten.scaled_dot_product_attention.default": _sdpa,
    "aten.convolution.default": _convolution,
    "aten.conv1d.default": _conv("conv1d", 1, False),
    "aten.conv2d.default": _conv("conv2d", 2, False),
    "aten.conv3d.default": _conv("conv3d", 3, False),
    "aten.conv_transpose1d.default": _conv("conv_transpose1d", 1, True),
    "aten.conv_transpose2d.input": _conv("conv_transpose2d", 2, True),
    "aten.conv_transpose3d.input": _conv("conv_transpose3d", 3, True),
    "aten.max_pool1d.default": _max_pool("max_pool1d", 1),
    "aten.max_pool2d.default": _max_pool("max_pool2d", 2),
    "aten.max_pool3d.default": _max_pool("max_pool3d", 3),
    # return_indices=True: (values, where each maximum is in its input plane); the pool template
    # computes both (its tuple result's parts are the node's outputs, as for max.dim)
    "aten.max_pool1d_with_indices.default": _max_pool("max_pool1d", 1),
    "aten.max_pool2d_with_indices.default": _max_pool("max_pool2d", 2),
    "aten.max_pool3d_with_indices.default": _max_pool("max_pool3d", 3),
    "aten.avg_pool1d.default": _avg_pool("avg_pool1d", 1),
    "aten.avg_pool2d.default": _avg_pool("avg_pool2d", 2),
    "aten.avg_pool3d.default": _avg_pool("avg_pool3d", 3),
    "aten.adaptive_avg_pool2d.default": _adaptive_avg("adaptive_avg_pool2d", 2),
    "aten.adaptive_avg_pool3d.default": _adaptive_avg("adaptive_avg_pool3d", 3),
    "aten.batch_norm.default": _batch_norm,
    "aten._native_batch_norm_legit_no_training.default": _batch_norm_inference,
    "aten.instance_norm.default": _instance_norm,
    "aten.group_norm.default": _group_norm,
    "aten.layer_norm.default": _layer_norm,
    "aten.rms_norm.default": _rms_norm,
    "aten.softmax.int": _softmax("softmax"),
    "aten._softmax.default": _softmax("softmax", "half_to_float"),
    "aten._log_softmax.default": _softmax("log_softmax", "half_to_float"),
    "aten.log_softmax.int": _softmax("log_softmax"),
    "aten.sum.dim_IntList": _reduce("sum"),
    "aten.sum.default": _reduce("sum"),
    "aten.mean.dim": _reduce("mean"),
    "aten.mean.default": _reduce("mean"),
    "aten.amax.default": _reduce("max"),
    "aten.amin.default": _reduce("min"),
    "aten.max.default": _reduce("max"),  # no dim: over every axis, to a 0-d tensor
    "aten.min.default": _reduce("min"),
    "aten.max.dim": _reduce("max", single_axis=True),
    "aten.min.dim": _reduce("min", single_axis=True),
    "aten.prod.dim_int": _reduce("prod", single_axis=True),
    "aten.argmax.default": _reduce("argmax", single_axis=True),
    "aten.argmin.default": _reduce("argmin", single_axis=True),
    "aten.logsumexp.default": _reduce("logsumexp"),
    "aten.var.correction": _variance("var"), "aten.var.dim": _variance("var"),
    "aten.std.correction": _variance("std"), "aten.std.dim": _variance("std"),
    "aten.signbit.default": _unary("signbit"),
    "aten.linalg_vector_norm.default": _vector_norm,
    "aten.cumsum.default": _scan("cumsum"),
    "aten.cumprod.default": _scan("cumprod"),
    "aten.logcumsumexp.default": _scan("logcumsumexp"),
    "aten.cummax.default": _scan("cummax"), "aten.cummin.default": _scan("cummin"),
    "aten.sort.default": _sort, "aten.sort.stable": _sort, "aten.topk.default": _topk,
    "aten.kthvalue.default": _kthvalue, "aten.median.default": _median("median"), "aten.median.dim": _median("median"),
    "aten.nanmedian.default": _median("nanmedian"), "aten.nanmedian.dim": _median("nanmedian"),
    "aten.mode.default": _mode,
    **_LINALG,
    "aten.lstm.input": _recurrent("lstm"), "aten.gru.input": _recurrent("gru"),
    "aten.rnn_tanh.input": _recurrent("rnn_tanh"), "aten.rnn_relu.input": _recurrent("rnn_relu"),
    "aten.mse_loss.default": _pointwise_loss("mse_loss", [], {}),
    "aten.smooth_l1_loss.default": _pointwise_loss("smooth_l1_loss", ["beta"], {"beta": 1.0}),
    "aten.huber_loss.default": None,  # huber differs from smooth-l1 by a factor: leave to PyTorch
    "aten.kl_div.default": _kl_div,
    "aten.cross_entropy_loss.default": _cross_entropy,
    "aten.triplet_margin_loss.default": _triplet,
    **_PRIMS_SAME,
}


def match(node, values) -> tuple[str, dict] | None:
    """The vocabulary operator and attributes for a captured node, or None."""
    matcher = MATCHERS.get(node.target)
    if matcher is None:
        return None
    try:
        return matcher(node, values)
    except (KeyError, TypeError, ValueError, IndexError):  # an argument form we do not model
        return None
