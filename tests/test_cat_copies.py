"""cat and stack with nothing fused after them: each input copied into its place, a tile of one
input per program (`policy/emit/gather.py`, `_copied`), end to end on CPU (capture ->
BuiltinPolicy -> the Verifier under the Triton interpreter, also at another batch size). Their
readers here are templates (pooling, a reduction), so the cat is a kernel of its own rather than
read where it is used. The tile's host choice (`copy_tile`) is checked directly."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from test_policy_pool_scan_loss import check, source  # noqa: E402

from drtriton.policy.emit.gather import cat_rows, copy_tile  # noqa: E402

COPIED = [
    # three inputs along channels, one a slice (not contiguous: copied first)
    ("F.max_pool2d(torch.cat([x, x.exp(), x[:, :2]], 1), 2)", "torch.randn(2, 5, 6, 6)", "x"),
    # along the last dim: runs of a few elements, so a tile holds several rows
    ("F.avg_pool2d(torch.cat([x[:, :3], y.sigmoid()], -1), 2)", "torch.randn(2, 5, 6, 6), torch.randn(2, 3, 6, 6)", "x, y"),
    # an empty input (no tiles of its own) first, then forward's own inputs
    ("F.max_pool2d(torch.cat([x[:, :0], x, y], 1), 2)", "torch.randn(2, 3, 4, 4), torch.randn(2, 2, 4, 4)", "x, y"),
    # along dim 0 (one row) and a DenseNet block's many inputs: the program picks one of 26
    ("F.max_pool2d(torch.cat([x * (i + 1) for i in range(26)], 0), 2)", "torch.randn(2, 3, 4, 4)", "x"),
    # more inputs than a cat read in place may have (recompute.MAX_CAT_BRANCHES): it takes no
    # epilogue (each element would load under every input's mask), so it copies, and the ReLU after it
    # runs in the pool's prologue
    ("F.max_pool2d(torch.relu(torch.cat([x * (i + 1) for i in range(6)], 1)), 2)", "torch.randn(2, 3, 4, 4)", "x"),
    # ShuffleNet's unit: a chunk (a channel slice, read in place through its row stride) beside a branch
    ("F.max_pool2d(torch.cat([x.chunk(2, 1)[0], x.chunk(2, 1)[1].exp()], 1), 2)", "torch.randn(2, 6, 4, 4)", "x"),
    # a slice along the last dim: not rows of one stride, copied first
    ("F.max_pool2d(torch.cat([x[..., ::2], x[..., 1::2] * 2.0], 1), 2)", "torch.randn(2, 3, 4, 8)", "x"),
    # a view of forward's input as an input (checked: its sizes are the caller's)
    ("F.max_pool2d(torch.cat([x, y[:, :3]], 1), 2)", "torch.randn(2, 3, 4, 4), torch.randn(2, 5, 4, 4)", "x, y"),
    # stack, new dims in the middle and at the end
    ("torch.stack([x, x * 2.0, x.neg()], 1).sum(1)", "torch.randn(3, 4, 5)", "x"),
    ("torch.stack([x, x.exp()], -1).amax(-1)", "torch.randn(6, 7)", "x"),
]


@pytest.mark.parametrize("expr,inputs,args", COPIED, ids=[c[0] for c in COPIED])
def test_cat_and_stack_copy_each_input_into_its_place(cpu_verifier, expr, inputs, args):
    cand = check(cpu_verifier, source(expr, inputs, args=args), [])
    assert "each input copied into its place" in cand.source, cand.description


@pytest.mark.parametrize("runs,tile", [
    ([100352, 25088, 25088], (1, 1024)),  # a DenseNet block
    ([256, 128, 64], (16, 64)),  # features along the last dim: the narrowest fills its lanes
    ([1, 1, 1], (1024, 1)),  # a stack along a new last dim: rows of one
    ([1000, 1], (1, 1024)),  # a narrow input beside a wide one: the wide one sets the tile
    ([0, 0], (1024, 1)), ([0, 3000], (1, 1024)),
])
def test_the_copy_tile_follows_the_narrowest_input_holding_a_fair_share(runs, tile):
    assert copy_tile(runs) == tile


def test_a_forward_taking_its_tensors_as_varargs_binds_them(cpu_verifier):
    # torch.export names the tuple's tensors xs_0, xs_1, ...: the generated forward binds them
    cand = check(cpu_verifier, source("F.max_pool2d(torch.cat(xs[:2], 1), 2) + xs[2].sum()",
                                      "torch.randn(2, 3, 4, 4), torch.randn(2, 1, 4, 4), torch.randn(3)", args="*xs"), [])
    assert "xs_0 = xs[0]" in cand.source and "def forward(self, *xs)" in cand.source


VIEWS = [  # (the input, the cat's dim, read in place)
    ("x", 1, True), ("x[:, :3]", 1, True), ("x[:, 3:]", 1, True), ("x[:1]", 1, True), ("x[:, 2]", 1, True),
    ("x[0]", 0, True), ("x.chunk(2, dim=3)[1]", 3, True),
    ("x[:, :, :2]", 1, False), ("x.transpose(2, 3)", 1, False), ("x[..., ::2]", 3, False),
    ("x[:, :3]", 2, False),  # rows (n, c) of strides 96 and 16: not one axis
]


@pytest.mark.parametrize("view,dim,in_place", VIEWS)
def test_an_input_is_read_in_place_where_its_rows_have_one_stride(view, dim, in_place):
    x = torch.randn(2, 6, 4, 4)
    t = eval(view)
    u, stride = cat_rows(t, dim)
    outer, run = int(torch.tensor(t.shape[:dim]).prod()), int(torch.tensor(t.shape[dim:]).prod())
    rows = torch.as_strided(u, (outer, run), (stride, 1), u.storage_offset())
    assert torch.equal(rows, t.reshape(outer, run))
    assert (u is t) == in_place


def test_varargs_holding_a_list_and_a_name_like_theirs(cpu_verifier):
    # export names a list inside the tuple xs_0_0, xs_0_1; a parameter named like one is left alone
    cand = check(cpu_verifier, source("torch.cat([xs[0][0], xs[0][1], xs_1], 1).sum(1)",
                                      "torch.randn(2, 3), [torch.randn(2, 3), torch.randn(2, 3)]", args="xs_1, *xs"), [])
    assert "xs_0_0 = xs[0][0]" in cand.source and "xs_1 = xs[1]" not in cand.source
