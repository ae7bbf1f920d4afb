"""Template and capture fixes found by PyTorch's OpInfo operators (benchmarks/opinfo.py, issue 16),
end to end on CPU: capture -> BuiltinPolicy -> the Verifier under the Triton interpreter (full
checks, so also at another batch size). Each case failed before its fix:

- max pooling with return_indices: captured as the pool operator with its indices (it was taken
  apart into index arithmetic whose fragments could not be checked);
- reductions and softmax of float64, integer and boolean inputs, and an epilogue's bool result
  (the rows template allowed only float32 and stored every value as float32);
- an epilogue reading max's indices (it loaded them from memory that was never written);
- reductions over axes that are not adjacent (batch statistics over N and L, renorm);
- a leading size of 1 (torch.export pinned it: views baked it in, other batch sizes failed; a
  value of the batch traced at 1 was read as broadcast along it);
- training batch_norm whose running statistics are forward's inputs: Unsupported, clearly.
"""

from __future__ import annotations

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from test_policy_pool_scan_loss import capture, check, first_candidate, source  # noqa: E402

from drtriton.policy.emit import Names, Unsupported, batchnorm  # noqa: E402
from drtriton.policy.program import Program  # noqa: E402

# -- max pooling with its indices --------------------------------------------------------------

POOL_INDICES = [
    ("F.max_pool1d(x, 3, 2, 1, 2, True, True)", "torch.randn(2, 3, 9)", "max_pool1d"),
    ("F.max_pool2d(x, 3, 2, 0, 1, True, True)", "torch.randn(2, 3, 7, 8)", "max_pool2d"),  # OpInfo's
    ("F.max_pool2d(x, 3, 2, 1, 2, False, True)", "torch.randn(2, 3, 9, 8)", "max_pool2d"),
    ("F.max_pool3d(x, 2, 2, 1, 1, True, True)", "torch.randn(2, 2, 5, 6, 5)", "max_pool3d"),
    # the indices through an epilogue, the values through another
    ("(lambda r: (r[0].relu(), r[1] + 1))(F.max_pool2d(x, 2, return_indices=True))", "torch.randn(2, 3, 8, 8)",
     "max_pool2d"),
]


@pytest.mark.parametrize("expr,inputs,op", POOL_INDICES, ids=[c[0] for c in POOL_INDICES])
def test_max_pool_with_indices(cpu_verifier, expr, inputs, op):
    cand = check(cpu_verifier, source(expr, inputs), [op])
    assert "acc_i" in cand.source  # the pool template's indices, not index arithmetic


# -- reductions: dtypes, epilogues, axes -------------------------------------------------------

ROWS = [
    # softmax with a dtype: the input cast to float64 as it is read, float64 throughout
    ("torch.softmax(x, 0, dtype=torch.float64)", "torch.randn(5, 3)", "softmax"),
    ("torch.log_softmax(x, 1, dtype=torch.float64)", "torch.randn(4, 6)", "log_softmax"),
    # booleans summed in int64 (all, any, count_nonzero, isin are made of these)
    ("torch.all(x > 0, dim=1)", "torch.randn(6, 5)", "sum"),
    ("torch.count_nonzero(x > 0.5, dim=0)", "torch.randn(7, 4)", "sum"),
    ("torch.isin(x, y)", "torch.randint(0, 5, (20,)).float(), torch.randint(0, 5, (5,)).float()", "sum"),
    # an epilogue's comparison stored as bool
    ("x.amax(1) > 0", "torch.randn(6, 5)", "max"),
    # max's indices read by an epilogue
    ("torch.max(x, 1)[1] * 2 + torch.max(x, 1)[0].signbit()", "torch.randn(6, 5)", "max"),
    # axes that are not adjacent: batch statistics of (N, C, L), renorm
    ("x.sum(dim=(0, 2))", "torch.randn(3, 4, 5)", "sum"),
    ("torch.var(x, dim=(0, 2), keepdim=True, correction=0)", "torch.randn(3, 4, 5)", "var"),
    ("torch.renorm(x, 2, 1, 0.5)", "torch.randn(3, 4, 5)", "norm"),
]


@pytest.mark.parametrize("expr,inputs,op", ROWS, ids=[c[0] for c in ROWS])
def test_rows(cpu_verifier, expr, inputs, op):
    args = "x, y" if ", torch." in inputs else "x"
    check(cpu_verifier, source(expr, inputs, args=args), [op])


# -- a leading size of 1 -----------------------------------------------------------------------

BATCH_OF_ONE = [
    ("F.pixel_shuffle(x, 2) * 2.0", "torch.randn(1, 8, 3, 3)", "mul_scalar"),
    ("F.channel_shuffle(x, 2) + 1.0", "torch.randn(1, 4, 3, 3)", "add_scalar"),
    ("torch.block_diag(x, x)", "torch.randn(1, 3)", "cat"),
    # a value of the batch (symbolic, 1 at capture) broadcast over the features: LLaMA's RMSNorm
    # and a softmax written out; it was read as a broadcast along the batch (one row for all)
    ("x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)", "torch.randn(1, 4, 8)", "rsqrt"),
    ("(x - x.amax(-1, keepdim=True)).exp()", "torch.randn(1, 3, 6)", "exp"),
    # a fixed (1, 4, 8) beside the batch: not of the output's shape, it broadcasts along the batch
    ("torch.ones(1, 4, 8) * 2.0 + x", "torch.randn(1, 4, 8)", "add"),
]


@pytest.mark.parametrize("expr,inputs,op", BATCH_OF_ONE, ids=[c[0] for c in BATCH_OF_ONE])
def test_batch_of_one_follows_the_batch(cpu_verifier, expr, inputs, op):
    """A batch of 1 is traced symbolic: the converted module takes a batch of 2 as well (the
    verifier's other-shapes trial)."""
    _, graph, _ = capture(source(expr, inputs))
    assert graph.values[graph.inputs[0]].symbolic == [0], "the batch size was pinned"
    check(cpu_verifier, source(expr, inputs), [])


def test_a_batch_of_one_keeps_what_forward_decides_on_it_and_other_inputs_fixed():
    # a test of the batch size: the graph is the one traced at 1 (at 2 it would take the other
    # branch without a guard); a first input that is no batch does not pin the one after it
    _, graph, _ = capture(source("x * 2 if x.size(0) == 1 else x * 3", "torch.randn(1, 4, 8)"))
    assert [(n.target, n.args[1:]) for n in graph.nodes] == [("aten.mul.Tensor", [2])]
    _, graph, _ = capture(source("torch.relu(x @ w).view(x.shape[0], -1)", "torch.randn(16, 16), torch.randn(1, 5, 16)",
                                 args="w, x"))
    assert graph.values["x"].symbolic == [0] and graph.values["w"].symbolic == []


LEADING_ONE_BROADCAST = [
    # a (1, T, D) operand beside a (B, T, D) input is a broadcast, not a batch of 1: traced as one,
    # it was given the batch's symbol and every candidate raised "converted with them equal"
    ("x + z", "torch.randn(2, 4, 8), torch.randn(1, 4, 8)", "x, z"),
    # (the batch of 2 a trace at two makes of the 1 as well)
    ("self.lin(x) + z", "torch.randn(2, 4, 8), torch.randn(1, 4, 8)", "x, z"),
    # an attention-style mask (1, 1, T, T) beside (B, H, T, T) scores
    ("torch.softmax(x.masked_fill(m > 0, -1e4), -1)", "torch.randn(2, 2, 4, 4), torch.randn(1, 1, 4, 4)", "x, m"),
    # the broadcast one first, and a batch of 1 that is one beside it
    ("z * y + x.sum(0, keepdim=True)", "torch.randn(1, 5), torch.randn(1, 5), torch.randn(3, 5)", "z, y, x"),
]


@pytest.mark.parametrize("expr,inputs,args", LEADING_ONE_BROADCAST, ids=[c[0] for c in LEADING_ONE_BROADCAST])
def test_a_leading_one_that_broadcasts_stays_fixed(cpu_verifier, expr, inputs, args):
    src = source(expr, inputs, args=args, init="self.lin = nn.Linear(8, 8)")
    _, graph, _ = capture(src)
    batched = next(name for name in graph.inputs if graph.values[name].shape[0] > 1)
    assert graph.values[batched].symbolic == [0], "the batch size was pinned"
    for name in graph.inputs:
        value = graph.values[name]
        if value.shape[0] == 1 and value.symbolic:
            assert value.symbols[0] != graph.values[batched].symbols[0], f"{name}'s 1 was traced as the batch"
    check(cpu_verifier, src, [])


WEIGHTS_GIVEN_TO_FORWARD = [
    # a weight's leading size equal to the batch of 1 was doubled with it: the kernel fixed 2
    # output channels (OpInfo's conv3d); its sizes are now traced static, its shape checked
    ("F.conv3d(x, w, b, padding='same')", "torch.randn(1, 1, 4, 4, 4), torch.randn(1, 1, 1, 1, 1), torch.randn(1)",
     "conv3d", ("out_channels", 1), (2, 1, 1, 1, 1)),
    ("F.conv2d(x, w, b, padding=1)", "torch.randn(1, 2, 5, 5), torch.randn(1, 2, 3, 3), torch.randn(1)",
     "conv2d", ("out_channels", 1), (2, 2, 3, 3)),
]


def test_a_weight_given_to_forward_that_follows_the_batch_keeps_it(cpu_verifier):
    # the linear template reads its features from the weight at run time: x @ x^T keeps the
    # batch, and the verifier's other batch size passes
    _, graph, _ = capture(source("F.linear(x, x)", "torch.randn(4, 6)"))
    assert graph.values["x"].symbolic == [0]
    check(cpu_verifier, source("F.linear(x, x)", "torch.randn(4, 6)"), ["linear"])


_CALL_WITH_WEIGHTS = """
import importlib.util, sys, torch
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
reference, candidate = load(sys.argv[1], "reference"), load(sys.argv[2], "candidate")
x, w, b = reference.get_inputs()
torch.testing.assert_close(candidate.ModelNew()(x, w, b), reference.Model()(x, w, b), rtol=1e-4, atol=1e-4)
other = eval(sys.argv[3])
if other:  # a convolution's channels and taps are its kernel's constants
    try:
        candidate.ModelNew()(x, torch.randn(other), torch.randn(other[0]))
    except ValueError as e:
        print(e)
"""


@pytest.mark.parametrize("expr,inputs,op,attr,other", WEIGHTS_GIVEN_TO_FORWARD, ids=[c[0] for c in WEIGHTS_GIVEN_TO_FORWARD])
def test_a_weight_given_to_forward_fixes_its_sizes(tmp_path, expr, inputs, op, attr, other):
    import os
    import subprocess
    import sys

    src = source(expr, inputs, args="x, w, b")
    _, graph, _ = capture(src)
    node = next(n for n in graph.nodes if n.op == op)
    assert node.attrs[attr[0]] == attr[1], node.attrs
    assert graph.values["w"].symbolic == [], "an operator's sizes were left symbolic"
    _, cand = first_candidate(src)
    (tmp_path / "reference.py").write_text(src)
    (tmp_path / "candidate.py").write_text(cand.source)
    proc = subprocess.run([sys.executable, "-c", _CALL_WITH_WEIGHTS, str(tmp_path / "reference.py"),
                           str(tmp_path / "candidate.py"), repr(other)],
                          capture_output=True, text=True, env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "convert it again with inputs shaped as you call it" in proc.stdout


# -- 0-d tensors through operators along a dim (OpInfo's other samples) -------------------------

RANK_ZERO = [
    ("torch.gather(x, 0, i)", "torch.randn(()), torch.tensor(0)", "x, i", "gather"),
    ("torch.scatter_add(x, 0, i, y)", "torch.randn(()), torch.tensor(0), torch.randn(())", "x, i, y", "scatter"),
    ("torch.scatter_reduce(x, 0, i, y, 'amax')", "torch.randn(()), torch.tensor(0), torch.randn(())", "x, i, y",
     "scatter"),
    ("torch.index_select(x, 0, i)", "torch.randn(()), torch.tensor([0])", "x, i", "index_select"),
    ("torch.cummax(x, 0)", "torch.randn(())", "x", "cummax"),
    ("torch.logcumsumexp(x, 0) * 2.0", "torch.randn(())", "x", "logcumsumexp"),
]


@pytest.mark.parametrize("expr,inputs,args,op", RANK_ZERO, ids=[c[0] for c in RANK_ZERO])
def test_rank_zero_operands_along_a_dim(cpu_verifier, expr, inputs, args, op):
    """PyTorch reads a 0-d tensor as one element along dim 0; the templates see a one-element
    view (`drtriton.rank0`), and the results are 0-d again (they were "a 0-d result")."""
    cand = check(cpu_verifier, source(expr, inputs, args=args), [op])
    assert "_as_1" in cand.source


# -- integer bits and 16-bit results --------------------------------------------------------------

OTHER_DTYPES = [
    # reflection padding's parity (`& 1` on integers) inside grid_sample's lowering (computed
    # where the kernels read it: the grid's columns are index maps onto g)
    ("F.grid_sample(x, g, mode='bicubic', padding_mode='reflection', align_corners=True)",
     "torch.randn(2, 3, 5, 6), torch.rand(2, 4, 3, 2) * 2.4 - 1.2", "x, g", "where"),
    ("(a & b) ^ (a | 3) + (~b & 1)", "torch.randint(-64, 64, (4, 8)), torch.randint(-64, 64, (8,))", "a, b",
     "bitwise_xor"),
    # a module returning float16 / bfloat16 (the verifier allows the dtype it returns)
    ("(x * 2.0).half()", "torch.randn(4, 8)", "x", "to_dtype"),
    ("torch.relu(x).bfloat16()", "torch.randn(4, 8)", "x", "to_dtype"),
]


@pytest.mark.parametrize("expr,inputs,args,op", OTHER_DTYPES, ids=[c[0] for c in OTHER_DTYPES])
def test_integer_bits_and_16_bit_results(cpu_verifier, expr, inputs, args, op):
    check(cpu_verifier, source(expr, inputs, args=args), [op])


def test_searchsorted_is_bucketize_with_its_operands_swapped(cpu_verifier):
    # isin of a larger test set lowers to sort and searchsorted (it needed PyTorch)
    check(cpu_verifier, source("torch.searchsorted(s, v), torch.searchsorted(s, v, side='right', out_int32=True)",
                               "torch.randint(0, 8, (12,)).float().sort().values, torch.randint(-1, 9, (4, 5)).float()",
                               args="s, v"), ["bucketize"])
    check(cpu_verifier, source("torch.isin(x, y)", "torch.randint(0, 9, (6,)).float(), torch.randint(0, 9, (20,)).float()",
                               args="x, y"), ["bucketize"])


LAZY = [
    ("self.lin(x).relu()", "torch.randn(4, 6)", "self.lin = nn.LazyLinear(5)"),
    ("self.conv(x) * 2.0", "torch.randn(2, 3, 8, 8)", "self.conv = nn.LazyConv2d(4, 3, padding=1)"),
    ("self.norm(x)", "torch.randn(4, 3, 5, 5)", "self.norm = nn.LazyBatchNorm2d()"),
]


@pytest.mark.parametrize("expr,inputs,init", LAZY, ids=[c[2] for c in LAZY])
def test_lazy_layers_take_their_sizes_from_a_first_forward(cpu_verifier, expr, inputs, init):
    """A lazy layer's parameters are uninitialised until its first forward: the reference runs
    one (from the init seed) before its state is read, and the candidate's lazy layers are sized
    by loading that state (ModuleInfo's LazyConv* could not be checked)."""
    from drtriton.problem import from_source
    from drtriton.search import Search, SearchConfig

    search = Search(from_source(source(expr, inputs, init=init), name="lazy"), cpu_verifier,
                    SearchConfig(mode="strict", budget_s=180))
    for _ in search.run():
        pass
    assert search.result.correct, search.result.reason
    assert search.result.verdict.triton_kernels


MASKED_ASSIGNMENT = [
    # one boolean mask and a value the same for every selected element: where(mask, v, x)
    ("(lambda y: (y.__setitem__(x[:, 0] > 0, v), y)[1])(x.clone())", "torch.randn(6, 5), torch.randn(5)", "x, v"),
    ("(lambda z: (z.__setitem__(x > 0.5, 0.0), z)[1])(x * 2)", "torch.randn(6, 5), torch.randn(5)", "x, v"),
    ("torch.index_put(x, (x[:, 1] < 0,), v, accumulate=True)", "torch.randn(6, 5), torch.randn(1, 5)", "x, v"),
    # a full slice before the mask: x[:, mask] = a number computed in forward
    ("(lambda y: (y.__setitem__((slice(None), x[0] > 0), v.sum()), y)[1])(x.clone())", "torch.randn(6, 5), torch.randn(5)",
     "x, v"),
]


@pytest.mark.parametrize("expr,inputs,args", MASKED_ASSIGNMENT, ids=[c[0] for c in MASKED_ASSIGNMENT])
def test_masked_assignment_of_one_value_is_a_where(cpu_verifier, expr, inputs, args):
    """`x[mask] = v` selects a data-dependent set, but where v does not depend on its size the
    result is where(mask, v, x): it needed PyTorch (OpInfo's index_put, and user code)."""
    check(cpu_verifier, source(expr, inputs, args=args), ["where"])


MASKED_ELEMENTWISE_UPDATE = [
    # x[m] = f(x[m]) with f elementwise: where(m, f(x), x), no selection (drtriton/masked_update.py)
    ("(lambda y: (y.__setitem__(x > 0, torch.sigmoid(x[x > 0])), y)[1])(x.clone())", "torch.randn(6, 5)", "x"),
    # rows selected by a mask over the first dim; an operand over the dims after it
    ("(lambda y: (y.__setitem__(x[:, 0] > 0, x[x[:, 0] > 0] * 2 + v), y)[1])(x.clone())",
     "torch.randn(6, 5), torch.randn(5)", "x, v"),
    # accumulated
    ("torch.index_put(x, (x[:, 0] > 0,), x[x[:, 0] > 0].exp(), accumulate=True)", "torch.randn(6, 5)", "x"),
]


@pytest.mark.parametrize("expr,inputs,args", MASKED_ELEMENTWISE_UPDATE, ids=[c[0] for c in MASKED_ELEMENTWISE_UPDATE])
def test_masked_update_of_an_elementwise_value_selects_nothing(cpu_verifier, expr, inputs, args):
    cand = check(cpu_verifier, source(expr, inputs, args=args), ["where"])
    # nothing selected, and the clone the update wrote into is not copied
    assert not any(op in line for line in cand.plan for op in ("cumsum", "index")), cand.plan
    assert ".clone()" not in cand.source or "index_put(" in expr


MASKED_ASSIGNMENT_PER_ELEMENT = [
    # values that are not elementwise over the selection: its order reversed, a layer over its
    # rows; masked_scatter's order (x[mask] lists them in x's row-major order)
    ("(lambda y: (y.__setitem__(x > 0, x[x > 0].flip(0)), y)[1])(x.clone())", "torch.randn(6, 5)", "x"),
    ("(lambda y: (y.__setitem__(x[:, 0] > 0, F.linear(x[x[:, 0] > 0], w)), y)[1])(x.clone())",
     "torch.randn(6, 5), torch.randn(5, 5)", "x, w"),
    ("torch.index_put(x, (x[:, 0] > 0,), x[x[:, 0] > 0].flip(0), accumulate=True)", "torch.randn(6, 5)", "x"),
    # a full slice before the mask: traced as an update of a view of y, which is not rewritten
    ("(lambda y: (y.__setitem__((slice(None), x[0] > 0), x[:, x[0] > 0].exp()), y)[1])(x.clone())", "torch.randn(4, 7)",
     "x"),
    # the mask may select nothing on some inputs (a spare element is read, none is kept)
    ("(lambda y: (y.__setitem__(x > 2.5, x[x > 2.5].flip(0) - 1), y)[1])(x.clone())", "torch.randn(3, 4)", "x"),
]


@pytest.mark.parametrize("expr,inputs,args", MASKED_ASSIGNMENT_PER_ELEMENT, ids=[c[0] for c in MASKED_ASSIGNMENT_PER_ELEMENT])
def test_masked_assignment_of_a_value_per_element_is_a_masked_scatter(cpu_verifier, expr, inputs, args):
    """`x[mask] = g(x[mask])`: index_put's values follow the data in size; the selected positions
    read them through a cumsum of the mask (it needed PyTorch; its admission check raised on the
    data-dependent size, and the compaction's integer index_put beside it refused the lowering)."""
    check(cpu_verifier, source(expr, inputs, args=args), ["cumsum"])


def test_a_view_updated_in_place_is_not_rewritten():
    # y[:, m] = f(x[:, m]) traced as an update of a slice of y: the rewrite would drop the write
    from drtriton.masked_update import push_elementwise_into_masked_updates

    class Model(torch.nn.Module):
        def forward(self, x):
            y = x.clone()
            y[1:][x[1:] > 0] = torch.sigmoid(x[1:][x[1:] > 0])
            return y

    gm = torch.export.export(Model(), (torch.randn(4, 5),), strict=False).graph_module
    assert push_elementwise_into_masked_updates(gm) == 0


def test_masked_assignment_beside_an_embedding_bag_keeps_its_integer_scatters(cpu_verifier):
    # one round lowers both: embedding_bag's index_put (integer indices) stays a scatter
    check(cpu_verifier, source("(lambda y: (y.__setitem__(x[:, 0] > 0, 1.5), y)[1])(x.clone()), self.bag(i, o)",
                               "torch.randn(6, 4), torch.randint(0, 10, (8,)), torch.tensor([0, 3, 5])", args="x, i, o",
                               init="self.bag = nn.EmbeddingBag(10, 4, mode='sum')"), ["where"])


NAN_REDUCTIONS = [
    ("torch.amax(x, -1) - torch.amin(x, 1).sum()", "torch.where(torch.rand(6, 4, 10) < 0.2, float('nan'), torch.randn(6, 4, 10))"),
    # two rows of 40000: split over programs, the partial maxima combined by a second kernel
    ("x.amax(-1) * 2.0", "torch.where(torch.rand(2, 40000) < 1e-4, float('nan'), torch.randn(2, 40000))"),
    # argmax and argmin return the first NaN; max with its indices returns NaN and where it first is
    ("torch.argmax(x, -1) + torch.argmin(x, 1).sum()",
     "torch.where(torch.rand(6, 4, 10) < 0.2, float('nan'), torch.randn(6, 4, 10))"),
    ("(lambda r: r[0] * 2.0 + r[1])(torch.max(x, 2))",
     "torch.where(torch.rand(6, 4, 200) < 0.02, float('nan'), torch.randn(6, 4, 200))"),
]


@pytest.mark.parametrize("expr,inputs", NAN_REDUCTIONS, ids=[c[0] for c in NAN_REDUCTIONS])
def test_max_and_min_reductions_keep_nan(cpu_verifier, expr, inputs):
    """PyTorch's amax/amin of a row holding NaN is NaN; tl.max drops it (the interpreter and the
    GPU alike): the rows template folds and collapses with NaN-propagating max and min."""
    cand = check(cpu_verifier, source(expr, inputs), ["max"])
    assert "_max_nan" in cand.source and ("argm" not in expr or "_min_nan" in cand.source)


_CALL_AT_OTHER_BATCHES = """
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("candidate", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
model = module.ModelNew()
x, bias = torch.randn(8, 16), torch.randn(8, 16)
assert torch.allclose(model(x, bias), torch.relu(x + bias), atol=1e-6)
try:
    model(x, bias[:1])
except ValueError as e:
    print(e)
"""


def test_inputs_traced_with_one_batch_size_are_called_with_one(cpu_verifier, tmp_path):
    # traced at a batch of 1, x's batch and that of a (1, C) bias are one symbolic size: the
    # kernel indexes them alike, so a call that broadcasts the bias raises a clear error (it read
    # past the bias, NaN, before)
    import os
    import subprocess
    import sys

    cand = check(cpu_verifier, source("torch.relu(x + bias)", "torch.randn(1, 16), torch.randn(1, 16)",
                                      args="x, bias"), [])
    (tmp_path / "candidate.py").write_text(cand.source)
    proc = subprocess.run([sys.executable, "-c", _CALL_AT_OTHER_BATCHES, str(tmp_path / "candidate.py")],
                          capture_output=True, text=True, env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "bias.shape[0] is 1, x.shape[0] is 8: this module was converted with them equal" in proc.stdout


@pytest.mark.parametrize("expr", ["torch.relu(x.squeeze(0)) * 2", "x.squeeze(0).sum(-1)", "x.squeeze() + 1.0"])
def test_a_batch_of_one_squeezed_away_keeps_the_module_s_shapes(cpu_verifier, expr):
    # a batch treated as not 1 (size-obliviously, or traced at 2) is no longer squeezed away:
    # such a trace returns other shapes than the module does, and is not taken
    _, graph, _ = capture(source(expr, "torch.randn(1, 4, 8)"))
    assert len(graph.values[graph.outputs[0]].shape) < 3
    check(cpu_verifier, source(expr, "torch.randn(1, 4, 8)"), [])


@pytest.mark.parametrize("expr", ["x * self.ct(x).mean((2, 3), keepdim=True)",
                                  "x * (self.ct(x).mean((2, 3), keepdim=True) * 0.5)"])
def test_a_folded_reduction_of_a_batch_of_one_follows_the_batch(expr):
    # the mean over a transposed convolution's positions folds into its operands; what the fold
    # makes (and a scale after it) is of the batch, symbolic as the mean was, so the product with
    # x reads it per sample
    from drtriton.policy.fold import fold_linear_reductions

    _, graph, _ = capture(source(expr, "torch.randn(1, 4, 9, 7)", init="self.ct = nn.ConvTranspose2d(4, 4, 3, stride=2)"))
    folded, done = fold_linear_reductions(graph)
    assert done
    mul = next(n for n in folded.nodes if n.target == "aten.mul.Tensor" and n.args[0] == {"value": "x"})
    assert folded.values[mul.args[1]["value"]].symbolic == [0]


# -- batch_norm with its statistics as forward's inputs ----------------------------------------

def test_batch_norm_training_on_input_statistics_is_unsupported():
    src = source("F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.5, eps=0.6)",
                 "torch.randn(4, 3, 5), torch.zeros(3), torch.ones(3), torch.randn(3), torch.randn(3)",
                 args="x, rm, rv, w, b")
    _, graph, _ = capture(src)
    program = Program(graph)
    frag = next(f for f in program.fragments() if f.anchor is not None and f.anchor.op == "batch_norm")
    with pytest.raises(Unsupported, match="forward's inputs"):
        batchnorm.emit(program, frag, {}, Names(), device="cpu")
