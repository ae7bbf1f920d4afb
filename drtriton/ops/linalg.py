"""Matrix products: matmul (batched, broadcasting), bmm, linear (nn.Linear), the grouped product of
mixtures of experts, and attention.

FLOPs: 2 per multiply-accumulate; linear adds one per output element for the bias; attention
counts both products plus 5 per score for the softmax (6 with a mask).

Attention is two operators because an operator's inputs are fixed: `scaled_dot_product_attention`
(query, key, value) and `masked_attention` (the same and `attn_mask`: additive when floating,
where-style when boolean, as PyTorch reads it). Both take PyTorch's `scale` (None: 1/sqrt(E)) and
`enable_gqa` (query heads grouped over fewer key/value heads); neither is drawn with them, so
synthesis keeps its programs, and capture sets them from the traced call or from a pattern
(`drtriton.recompose`).
"""

from __future__ import annotations

import random

from drtriton.ops.operator import Choice, ModuleCall, Operator, Param, Slot
from drtriton.ops.shape import ShapeError, broadcast_shapes

_F = "torch.nn.functional."
#: the attention operators: one flash-attention template runs both (`policy/emit/attention.py`)
ATTENTION = ("scaled_dot_product_attention", "masked_attention")


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


def _grouped_mm_rule(ctx, dims, attrs):
    """(M, K) rows sorted by group, (G, K, N) weights, (G,) group ends -> (M, N)."""
    x, w, ends = dims
    if len(x) != 2 or len(w) != 3 or len(ends) != 1:
        raise ShapeError("grouped_mm takes (M, K) rows, (G, K, N) weights and (G,) group ends")
    ctx.require(x[1] == w[1], "grouped_mm: inner dimensions differ")
    ctx.require(ends[0] == w[0], "grouped_mm: one end per group's weights")
    return [x[0], w[2]], 2 * ctx.mul(x[0], x[1], w[2])


#: grouped_mm in plain PyTorch, for the property tests (every row through every group's weights,
#: its own group's product kept: the rows from the previous end up to its end; rows past the last
#: end are 0). transformers' own operator is what captured code calls.
_GROUPED_MM = ("torch.where(((torch.arange({x}.shape[0], device={x}.device) >= torch.cat([{z}.new_zeros(1), "
               "{z}[:-1]])[:, None]) & (torch.arange({x}.shape[0], device={x}.device) < "
               "{z}.view({y}.shape[0])[:, None]))[..., None], torch.matmul({x}, {y}), 0.0).sum(0)")


def _sdpa_rule(ctx, dims, attrs):
    q, k, v = dims[:3]
    if min(len(q), len(k), len(v)) < 2:
        raise ShapeError("attention needs query, key and value of rank >= 2")
    ctx.require(q[-1] == k[-1], "attention: query and key embedding sizes differ")
    ctx.require(k[-2] == v[-2], "attention: key and value sequence lengths differ")
    if attrs.get("enable_gqa"):
        if min(len(q), len(k), len(v)) < 3:
            raise ShapeError("grouped-query attention needs a heads axis (rank >= 3)")
        # PyTorch also takes different key and value head counts that both divide the query's;
        # the template reads both through one group size, so the rule keeps them equal
        ctx.require(k[-3] == v[-3], "attention: key and value head counts differ (grouped heads here share one count)")
        ctx.quotient(q[-3], k[-3], "attention: query heads are not a multiple of key/value heads")
        batch = broadcast_shapes(ctx, q[:-3], k[:-3], v[:-3]) + [q[-3]]
    else:
        batch = broadcast_shapes(ctx, q[:-2], k[:-2], v[:-2])
    length, source, embed, value_embed = q[-2], k[-2], q[-1], v[-1]
    scores = ctx.mul(*batch, length, source)
    flops = 2 * ctx.mul(scores, embed) + 2 * ctx.mul(scores, value_embed) + 5 * scores
    if len(dims) == 4:  # the mask broadcasts to the scores, never widening them
        mask, full = dims[3], batch + [length, source]
        if len(mask) > len(full):
            raise ShapeError("attention: the mask has more dimensions than the scores")
        for m, s in zip(reversed(mask), reversed(full)):
            ctx.require(ctx.broadcast(m, s) == s, "attention: the mask does not broadcast to the scores")
        flops = flops + scores
    return batch + [length, value_embed], flops


def _sdpa_template(masked: bool):
    """PyTorch's call: keyword arguments only where they differ from the defaults (the mask's
    operator has no `is_causal`: PyTorch refuses both)."""
    def template(attrs) -> str:
        extra = ", attn_mask={w}" if masked else ", is_causal={is_causal}"
        extra += ", scale={scale}" if attrs.get("scale") is not None else ""
        extra += ", enable_gqa=True" if attrs.get("enable_gqa") else ""
        return "F.scaled_dot_product_attention({x}, {y}, {z}" + extra + ")"
    return template


def _sdpa_fresh(rng: random.Random, slot: int, anchor_slot: int, anchor_rank: int) -> list:
    """Same batch dimensions as the anchor; key shares the query's embedding size, value shares
    the key's sequence length."""
    batch = list(range(anchor_rank - 2))
    last, second = anchor_rank - 1, anchor_rank - 2
    if slot == 1:  # key (..., S, E)
        return batch + ["free" if anchor_slot == 0 else second, last if anchor_slot == 0 else "free"]
    if slot == 2:  # value (..., S, Ev)
        return batch + [second if anchor_slot == 1 else "free", "free"]
    if slot == 3:  # mask (..., L, S), a broadcast batch
        return ["one"] * len(batch) + [second if anchor_slot == 0 else "free", "free"]
    return batch + ["free", last if anchor_slot == 1 else "free"]  # query (..., L, E)


def _sdpa_range(rs, attrs):
    return rs[2]  # a convex combination of value rows


def _masked_ranks(slot: int, known) -> tuple[int, ...]:
    """Query, key and value of one rank (2-4); the mask of any rank up to theirs."""
    rank = known.get(0, known.get(1, known.get(2)))
    if slot == 3:
        return tuple(range(1, (rank or 4) + 1))
    return (rank,) if rank is not None else (2, 3, 4)


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
        name="grouped_mm", category="matmul",
        description="rows sorted by group through their group's weights (the experts of a mixture: "
                    "transformers' grouped_mm_fallback); group g's rows end at ends[g], later rows are 0",
        slots=(Slot("input", (2,)), Slot("weight", (3,)), Slot("ends", (1,), domain="ends", index_of=(0, 0))),
        rule=_grouped_mm_rule, torch_template=_GROUPED_MM, drawn=False,
        torch_functions=("transformers.integrations.moe._grouped_mm_fallback",),  # the op is made of it
    ),
    Operator(
        name="scaled_dot_product_attention", category="matmul",
        description="softmax(q k^T * scale) v (scale 1/sqrt(E) unless given), optionally causal",
        slots=(Slot("query", (2, 3, 4)), Slot("key", (2, 3, 4)), Slot("value", (2, 3, 4))),
        same_rank=True, rule=_sdpa_rule, fresh=_sdpa_fresh, value_range=_sdpa_range,
        torch_template=_sdpa_template(masked=False),
        attrs=(Choice("is_causal", (False, True)),),
        torch_functions=(_F + "scaled_dot_product_attention",),
    ),
    Operator(
        name="masked_attention", category="matmul",
        description="softmax(q k^T * scale + mask) v; a boolean mask keeps the scores where True",
        slots=(Slot("query", (2, 3, 4)), Slot("key", (2, 3, 4)), Slot("value", (2, 3, 4)),
               Slot("attn_mask", (1, 2, 3, 4))),
        rank_rule=_masked_ranks, rule=_sdpa_rule, fresh=_sdpa_fresh, value_range=_sdpa_range,
        torch_template=_sdpa_template(masked=True),
        torch_functions=(_F + "scaled_dot_product_attention",),  # with attn_mask (`coverage.choose`)
        drawn=False,
    ),
)
