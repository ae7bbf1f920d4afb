"""Matrix products: matmul (batched, broadcasting), bmm, linear (nn.Linear) and attention.

FLOPs: 2 per multiply-accumulate; linear adds one per output element for the bias; attention
counts both products plus 5 per score for the softmax.
"""

from __future__ import annotations

import random

from drtriton.ops.operator import Choice, ModuleCall, Operator, Param, Slot
from drtriton.ops.shape import ShapeError, broadcast_shapes

_F = "torch.nn.functional."


def _matmul_rule(ctx, dims, attrs):
    a, b = dims
    if len(a) < 2 or len(b) < 2:
        raise ShapeError("matmul here takes operands of rank >= 2")
    ctx.require(a[-1] == b[-2], "matmul: inner dimensions differ")
    out = broadcast_shapes(ctx, a[:-2], b[:-2]) + [a[-2], b[-1]]
    return out, 2 * ctx.mul(ctx.mul(*out), a[-1])


def _matmul_fresh(rng: random.Random, slot: int, anchor_slot: int, anchor_rank: int) -> list:
    """A new operand matching the existing one: a plain (K, N) / (M, K) matrix, or the same
    batch dimensions."""
    batch = list(range(anchor_rank - 2)) if rng.random() < 0.4 else []
    if slot == 1:  # anchor is A (..., M, K): new B (..., K, N)
        return batch + [anchor_rank - 1, "free"]
    return batch + ["free", anchor_rank - 2]  # anchor is B (..., K, N): new A (..., M, K)


def _bmm_rule(ctx, dims, attrs):
    a, b = dims
    if len(a) != 3 or len(b) != 3:
        raise ShapeError("bmm takes two 3-D tensors")
    ctx.require(a[0] == b[0], "bmm: batch sizes differ")
    ctx.require(a[2] == b[1], "bmm: inner dimensions differ")
    return [a[0], a[1], b[2]], 2 * ctx.mul(a[0], a[1], b[2], a[2])


def _bmm_fresh(rng: random.Random, slot: int, anchor_slot: int, anchor_rank: int) -> list:
    return [0, 2, "free"] if slot == 1 else [0, "free", 1]


def _linear_rule(ctx, dims, attrs):
    (x,) = dims
    if len(x) < 1:
        raise ShapeError("linear needs an input of rank >= 1")
    out_features = ctx.param("out_features", lo=1, gen=(1, None))
    out = list(x[:-1]) + [out_features]
    flops = 2 * ctx.mul(ctx.mul(*x), out_features)
    if attrs.get("bias", True):
        flops = flops + ctx.mul(*out)
    return out, flops


def _linear_module(attrs, shapes):
    return ModuleCall("nn.Linear", (("in_features", shapes[0][-1]), ("out_features", attrs["out_features"])),
                      (("bias", attrs.get("bias", True)),))


def _sdpa_rule(ctx, dims, attrs):
    q, k, v = dims
    if min(len(q), len(k), len(v)) < 2:
        raise ShapeError("attention needs query, key and value of rank >= 2")
    ctx.require(q[-1] == k[-1], "attention: query and key embedding sizes differ")
    ctx.require(k[-2] == v[-2], "attention: key and value sequence lengths differ")
    batch = broadcast_shapes(ctx, q[:-2], k[:-2], v[:-2])
    length, source, embed, value_embed = q[-2], k[-2], q[-1], v[-1]
    scores = ctx.mul(*batch, length, source)
    flops = 2 * ctx.mul(scores, embed) + 2 * ctx.mul(scores, value_embed) + 5 * scores
    return batch + [length, value_embed], flops


def _sdpa_fresh(rng: random.Random, slot: int, anchor_slot: int, anchor_rank: int) -> list:
    """Same batch dimensions as the anchor; key shares the query's embedding size, value shares
    the key's sequence length."""
    batch = list(range(anchor_rank - 2))
    last, second = anchor_rank - 1, anchor_rank - 2
    if slot == 1:  # key (..., S, E)
        return batch + ["free" if anchor_slot == 0 else second, last if anchor_slot == 0 else "free"]
    if slot == 2:  # value (..., S, Ev)
        return batch + [second if anchor_slot == 1 else "free", "free"]
    return batch + ["free", last if anchor_slot == 1 else "free"]  # query (..., L, E)


def _sdpa_range(rs, attrs):
    return rs[2]  # a convex combination of value rows


OPERATORS = (
    Operator(
        name="matmul", category="matmul", description="batched matrix product with broadcasting",
        slots=(Slot("input", (2, 3, 4)), Slot("other", (2, 3, 4))), rule=_matmul_rule,
        torch_template="torch.matmul({x}, {y})", fresh=_matmul_fresh,
        torch_functions=("torch.matmul", "operator.matmul", "torch.mm"),
        tensor_methods=("matmul", "__matmul__", "mm"),
    ),
    Operator(
        name="bmm", category="matmul", description="batched matrix product (B, M, K) x (B, K, N)",
        slots=(Slot("input", (3,)), Slot("mat2", (3,))), rule=_bmm_rule,
        torch_template="torch.bmm({x}, {y})", fresh=_bmm_fresh, torch_functions=("torch.bmm",), tensor_methods=("bmm",),
    ),
    Operator(
        name="linear", category="matmul", description="nn.Linear: x W^T + b over the last axis",
        slots=(Slot("input", (1, 2, 3, 4)),), rule=_linear_rule, torch_template="self.{module}({x})",
        attrs=(Choice("bias", (True, True, True, False)),),
        params=(Param("out_features", "output features", test_range=(1, 6)),),
        module=_linear_module, torch_functions=(_F + "linear",), module_types=("torch.nn.Linear",),
    ),
    Operator(
        name="scaled_dot_product_attention", category="matmul",
        description="softmax(q k^T / sqrt(E)) v, optionally causal",
        slots=(Slot("query", (2, 3, 4)), Slot("key", (2, 3, 4)), Slot("value", (2, 3, 4))),
        same_rank=True, rule=_sdpa_rule, fresh=_sdpa_fresh, value_range=_sdpa_range,
        torch_template="F.scaled_dot_product_attention({x}, {y}, {z}, is_causal={is_causal})",
        attrs=(Choice("is_causal", (False, True)),),
        torch_functions=(_F + "scaled_dot_product_attention",),
    ),
)
