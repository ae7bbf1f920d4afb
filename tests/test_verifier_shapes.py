"""A second input configuration (issue #15): a converted module is a drop-in, so full checks also
compare it with the reference for another batch size. A kernel that hard-codes get_inputs()'s
shapes fails; a reference that cannot take another batch size is checked on its own shapes,
with a note."""

import json

import pytest
import torch

from drtriton.problem import from_source
from drtriton.verify import Verdict
from drtriton.verify.verdict import Trial
from verifier_cases import MATMUL, MATMUL_OK, RELU, RELU_KERNEL, RELU_OK, ROW_SUM, relu_candidate, src

OTHER = "other input shapes"


def problem(source, name):
    return from_source(source, name=name)


@pytest.mark.parametrize("case", ["relu", "matmul", "batch_of_one"])
def test_an_honest_candidate_passes_on_two_shape_configurations(cpu_verifier, case):
    """Halved where the batch is >= 2 (only the inputs that share the first one's leading size:
    matmul's b keeps its shape), grown to 2 from a batch of 1."""
    ref, cand, shapes, outputs = {
        "relu": (RELU, RELU_OK, [[[64, 96]], [[32, 96]]], 32 * 96),
        "matmul": (MATMUL, MATMUL_OK, [[[48, 40], [40, 56]], [[24, 40], [40, 56]]], 24 * 56),
        "batch_of_one": (RELU.replace("torch.randn(64, 96)", "torch.randn(1, 96)"), RELU_OK,
                         [[[1, 96]], [[2, 96]]], 2 * 96),
    }[case]
    v = cpu_verifier.verify(problem(ref, f"shapes {case}"), cand)
    assert v.correct, v.reasons
    assert v.shapes_checked == shapes
    other = [t for t in v.trials if t.phase == "other_shapes"]
    assert len(other) == 1 and other[0].passed and other[0].total == outputs
    assert [t.index for t in v.trials] == list(range(8))
    assert v.summary.startswith("correct on 7/7 trials")  # the summary names it only when it fails
    assert not any("second input configuration" in f for f in v.flags), v.flags


# A grid for exactly the rows get_inputs() gives (a constant), a reshape with a literal, a check
# that refuses other sizes: right on the problem's own shapes, wrong on any other.
ROW_SUM_OF_ONE = ROW_SUM.replace("torch.randn(16, 200)", "torch.randn(1, 200)")
ROW_SUM_GRID_FROM_A_CONSTANT = src("""
ROWS = 1  # get_inputs()'s batch

@triton.jit
def row_sum_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))

class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
        row_sum_kernel[(ROWS,)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return out
""")

HARD_CODED = {
    "grid_from_a_constant": (ROW_SUM_OF_ONE, ROW_SUM_GRID_FROM_A_CONSTANT, "incorrect",
                             "wrong for inputs with a leading dimension of 2 instead of 1 (other input shapes): "),
    "reshape_with_a_literal": (RELU, relu_candidate("""
        x = x.contiguous().view(64, -1)
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 8192),)](x, out, n, BLOCK=8192)
        return out
    """), "incorrect", "wrong for inputs with a leading dimension of 32 instead of 64 (other input shapes): shape"),
    "refuses_other_sizes": (RELU, relu_candidate("""
        if x.shape[0] != 64:
            raise ValueError("batch must be 64")
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 8192),)](x, out, n, BLOCK=8192)
        return out
    """), "failed", "fails for inputs with a leading dimension of 32 instead of 64 (other input shapes): "),
}


@pytest.mark.parametrize("name", sorted(HARD_CODED))
def test_a_candidate_that_hard_codes_the_batch_size_fails_on_other_shapes(cpu_verifier, name):
    ref, cand, status, reason = HARD_CODED[name]
    v = cpu_verifier.verify(problem(ref, f"hard-coded {name}"), cand)
    assert not v.correct and v.status == status, (v.status, v.reasons)
    assert v.reasons[0].startswith(reason), v.reasons
    assert OTHER in v.summary, v.summary
    assert len(v.shapes_checked) == 2
    assert all(t.passed for t in v.trials if t.phase == "initial")  # right on get_inputs()'s shapes
    if status == "incorrect":
        assert not v.trials[-1].passed and v.trials[-1].phase == "other_shapes"


def test_quick_checks_keep_to_the_problem_shapes_unless_asked(cpu_verifier):
    """The search's fragment checks (and RL rewards) are quick: no second configuration, so a
    hard-coded batch passes there; `other_shapes=True` asks for it."""
    ref, cand, _, reason = HARD_CODED["reshape_with_a_literal"]
    quick = cpu_verifier.verify(problem(ref, "quick hard-coded"), cand, quick=True)
    assert quick.correct, quick.reasons
    assert len(quick.shapes_checked) == 1 and all(t.phase != "other_shapes" for t in quick.trials)
    asked = cpu_verifier.verify(problem(ref, "quick hard-coded"), cand, quick=True, other_shapes=True)
    assert not asked.correct and asked.reasons[0].startswith(reason), asked.reasons


# References that take no other batch size: a literal in a view, a squeeze that changes the
# outputs' rank when the batch grows from 1.
VIEW_WITH_A_LITERAL = src("""
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x.view(4, -1))

def get_inputs():
    return [torch.randn(4, 5)]

def get_init_inputs():
    return []
""")

SQUEEZED_BATCH = src("""
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x).squeeze(0)

def get_inputs():
    return [torch.randn(1, 96)]

def get_init_inputs():
    return []
""")

SQUEEZED_OK = src(RELU_KERNEL + """
class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[1:], device=x.device, dtype=x.dtype)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 8192),)](x, out, n, BLOCK=8192)
        return out
""")

NO_SECOND = {
    "view_with_a_literal": (VIEW_WITH_A_LITERAL, RELU_OK, [[4, 5]],
                            "no second input configuration checked: the reference cannot take inputs with a "
                            "leading dimension of 2 instead of 4: the reference forward raised"),
    "squeezed_batch": (SQUEEZED_BATCH, SQUEEZED_OK, [[1, 96]],
                       "no second input configuration checked: the reference returns outputs of another "
                       "structure for inputs with a leading dimension of 2 instead of 1"),
}


@pytest.mark.parametrize("name", sorted(NO_SECOND))
def test_a_reference_without_another_batch_size_is_checked_on_its_own_shapes(cpu_verifier, name):
    ref, cand, shapes, note = NO_SECOND[name]
    v = cpu_verifier.verify(problem(ref, f"no second {name}"), cand)
    assert v.correct, v.reasons
    assert v.shapes_checked == [shapes]
    assert len(v.trials) == 7 and all(t.phase != "other_shapes" for t in v.trials)
    assert any(f.startswith(note) for f in v.flags), v.flags
    assert v.summary.startswith("correct on 7/7 trials")


def test_both_workers_draw_the_same_second_configuration(tmp_path):
    """Halving keeps the first rows of the trial's inputs (in tensors of their own) and leaves
    other arguments alone; growing adds rows drawn for another seed. Deterministic per seed, so
    the fingerprints of the two workers agree."""
    from drtriton.verify.worker.runtime import ProblemRuntime

    source = src("""
class Model(nn.Module):
    def forward(self, x, y, w, scale):
        return (x + y) @ w * scale

def get_inputs():
    return [torch.randn(6, 5), torch.randn(6, 5), torch.randn(5, 3), 2.0]

def get_init_inputs():
    return []
""")

    def runtime(get_inputs: str | None = None):
        text = source if get_inputs is None else source.replace("torch.randn(6, 5), torch.randn(6, 5)", get_inputs)
        return ProblemRuntime(problem(text, "second").to_dict(), "cpu", str(tmp_path), 1, training=False)

    a, b = runtime(), runtime()
    base, _ = a.make_inputs(7)
    inputs, fp, n, m = a.make_other_inputs(7)
    assert (n, m) == (6, 3)
    assert [list(v.shape) for v in inputs[:3]] == [[3, 5], [3, 5], [5, 3]] and inputs[3] == 2.0
    assert torch.equal(inputs[0], base[0][:3]) and torch.equal(inputs[2], base[2])
    assert inputs[0].untyped_storage().nbytes() == 3 * 5 * 4  # no view into the full batch
    assert b.make_other_inputs(7)[1] == fp and a.make_other_inputs(8)[1] != fp

    one = runtime("torch.randn(1, 5), torch.randn(1, 5)")
    first, _ = one.make_inputs(7)
    grown, fp, n, m = one.make_other_inputs(7)
    assert (n, m) == (1, 2) and [list(v.shape) for v in grown[:3]] == [[2, 5], [2, 5], [5, 3]]
    assert torch.equal(grown[0][:1], first[0]) and not torch.equal(grown[0][1], grown[0][0])
    assert runtime("torch.randn(1, 5), torch.randn(1, 5)").make_other_inputs(7)[1] == fp

    scalars = ProblemRuntime(problem(RELU.replace("torch.randn(64, 96)", "torch.tensor(3.0)"), "scalar").to_dict(),
                             "cpu", str(tmp_path), 1, training=False)
    assert scalars.make_other_inputs(7) == "no tensor input with a leading dimension"

    # a permutation of the batch (beam origins, routing): halved, it would index past the rows
    perm = runtime("torch.randn(6, 5), torch.randperm(6)")
    assert perm.make_other_inputs(7) == "an integer input may index the batch (its values lie below 6)"
    # token ids or positions along another axis are not batch indices: halved as usual
    ids = runtime("torch.randn(6, 5), torch.randint(10, 20, (6, 5))")
    assert ids.make_other_inputs(7)[2:] == (6, 3)
    # segment bounds over the batch (sorted offsets from 0, past the halved batch): kept whole they
    # would bound segments past its end, which PyTorch reads without a check
    bounds = runtime("torch.randn(6, 5), torch.tensor([0, 2, 2, 6])")
    assert bounds.make_other_inputs(7) == "an integer input may bound segments of the batch (sorted offsets up to 6)"
    within = runtime("torch.randn(6, 5), torch.tensor([0, 1, 3])")  # inside the halved batch: halved as usual
    assert within.make_other_inputs(7)[2:] == (6, 3)
    unsorted = runtime("torch.randn(6, 5), torch.tensor([0, 5, 2, 4])")  # not bounds: halved as usual
    assert unsorted.make_other_inputs(7)[2:] == (6, 3)
    for other in ("torch.randn(3, 3, dtype=torch.cfloat)", "torch.zeros(0, 3, dtype=torch.int64)"):
        assert runtime(f"torch.randn(6, 5), {other}").make_other_inputs(7)[2:] == (6, 3)  # (no error)


def test_shapes_checked_round_trip_and_old_verdicts_still_load():
    v = Verdict(correct=False, status="incorrect",
                reasons=["wrong for inputs with a leading dimension of 1 instead of 2 (other input shapes): NaN"],
                trials=[Trial(index=0, phase="initial", passed=True),
                        Trial(index=1, phase="other_shapes", passed=False, note="NaN")],
                shapes_checked=[[[2, 8], [8, 3]], [[1, 8], [8, 3]]])
    again = Verdict.from_dict(json.loads(v.to_json()))
    assert again == v and again.shapes_checked == [[[2, 8], [8, 3]], [[1, 8], [8, 3]]]
    assert again.summary == "incorrect: " + v.reasons[0]

    old = v.to_dict()
    del old["shapes_checked"]
    old.update(correct=True, status="correct", reasons=[], trials=[old["trials"][0]])
    loaded = Verdict.from_dict(json.loads(json.dumps(old)))
    assert loaded.shapes_checked == [] and loaded.summary.startswith("correct on 1/1 trials")


def test_the_float64_arbiter_runs_on_the_second_configuration(tmp_path):
    from drtriton.verify.worker.harness import ReferenceHarness
    from verifier_cases import CENTERED_MEAN

    harness = ReferenceHarness({"device": "cpu", "scratch": str(tmp_path)})
    reply = harness.op_prepare({"key": "k", "problem": problem(CENTERED_MEAN, "k").to_dict(), "device": "cpu",
                                "init_seed": 1, "training": False, "probe_seed": 2})
    assert reply["input_shapes"] == [[8, 4096]]
    other = harness.op_reference({"key": "k", "seed": 3, "other_shapes": True})
    assert other["sizes"] == [8, 4] and other["shapes"] == [[4, 4096]]
    fp32 = harness.outputs.pop(("k", 3))[0]
    exact, why = harness._exact_outputs("k", 3, 1, other_shapes=True)
    assert why == "" and exact[0].dtype == torch.float64 and exact[0].shape == fp32.shape == (4,)


def test_a_reference_that_breaks_on_the_second_configuration_means_none(tmp_path, monkeypatch):
    # On the GPU an index the new sizes put out of range is a device-side assert, raised at the
    # sync after the forward (EmbeddingBag's offsets into its halved indices): the check goes on
    # without that configuration instead of ending with "the problem cannot be checked"
    from drtriton.verify.worker.harness import ReferenceHarness

    harness = ReferenceHarness({"device": "cpu", "scratch": str(tmp_path)})
    harness.op_prepare({"key": "k", "problem": problem(RELU, "k").to_dict(), "device": "cpu",
                        "init_seed": 1, "training": False, "probe_seed": 2})

    def device_assert(runtime, inputs):
        raise RuntimeError("CUDA error: device-side assert triggered")

    monkeypatch.setattr(harness, "_forward", device_assert)
    reply = harness.op_reference({"key": "k", "seed": 3, "other_shapes": True})
    assert reply["ok"] and reply["skipped"].startswith("the reference fails with a leading dimension of 32 instead of 64")
    assert ("k", 3) not in harness.outputs
