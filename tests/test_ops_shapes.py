"""Property tests: each operator's shape rule agrees with PyTorch and with its CP-SAT form."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ops_cases import draw_case, run_rule, run_torch, torch_inputs

from drtriton import ops
from drtriton.ops.shape import ShapeError

cp_model = pytest.importorskip("ortools.sat.python.cp_model")

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
OPS = list(ops.VOCABULARY.values())


def _lenient(case, torch_out) -> bool:
    """Cases where PyTorch accepts what the rule rejects on purpose.

    - Transposed convolutions whose output size is 0: depending on the kernel it picks, PyTorch
      errors or returns an empty tensor; the rule always rejects.
    - Attention whose key and value sequence lengths differ: some CPU kernels do not check.
    - segment_reduce with one offset (no segment): PyTorch returns an empty result.
    """
    if not isinstance(torch_out, torch.Tensor):
        return False
    if (case.op.name.startswith("conv_transpose") or case.op.name == "segment_reduce") and 0 in torch_out.shape:
        return True
    return case.op.name == "scaled_dot_product_attention" and case.shapes[1][-2] != case.shapes[2][-2]


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
@SETTINGS
@given(data=st.data())
def test_rule_accepts_exactly_what_pytorch_accepts(op, data):
    case = draw_case(data, op)
    ours, theirs = run_rule(case), run_torch(case)
    if isinstance(ours, ShapeError):
        assert isinstance(theirs, Exception) or _lenient(case, theirs), (
            f"rule rejects ({ours}) but PyTorch accepts {case.shapes} {case.attrs}")
        return
    assert isinstance(theirs, torch.Tensor), f"rule accepts but PyTorch raises {theirs!r}: {case.shapes} {case.attrs}"
    shape, flops = ours
    assert tuple(theirs.shape) == shape
    assert str(theirs.dtype) == f"torch.{op.out_dtype}"
    assert flops > 0
    assert op.output_rank(case.ranks, case.attrs) == len(shape)


def _cpsat(case):
    """Solve the CP-SAT rule with the input sizes and parameters pinned."""
    model = cp_model.CpModel()
    dims = [[model.new_int_var(d, d, "") for d in shape] for shape in case.shapes]
    try:
        out, flops, params = case.op.constrain(model, dims, case.attrs, fixed=case.attrs)
    except ShapeError:
        return None
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 10
    status = solver.solve(model)
    assert status in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.INFEASIBLE), solver.status_name(status)
    if status == cp_model.INFEASIBLE:
        return None
    value = lambda e: e if isinstance(e, int) else solver.value(e)  # noqa: E731
    return tuple(value(d) for d in out), value(flops)


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
@SETTINGS
@given(data=st.data())
def test_cpsat_rule_agrees_with_concrete_rule(op, data):
    case = draw_case(data, op)
    ours = run_rule(case)
    solved = _cpsat(case)
    if isinstance(ours, ShapeError):
        assert solved is None, f"CP-SAT accepts {case.shapes} {case.attrs} that the rule rejects: {ours}"
    else:
        assert solved == ours, f"{case.shapes} {case.attrs}"


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_value_range_contains_outputs(op, data):
    """Outputs on inputs drawn from [-3, 3] (domains respected) lie in the predicted range."""
    case = draw_case(data, op)
    if isinstance(run_rule(case), ShapeError):
        return
    inputs = torch_inputs(case)
    ranges = []
    for slot, t in zip(op.slots, inputs):
        if slot.domain == "real":
            t.uniform_(-3, 3)
            ranges.append((-3.0, 3.0))
        else:  # positive: [0.5, 1.5]; unit: [0, 1]; index: class indices
            ranges.append((float(t.min()), float(t.max())))
    lo, hi = op.output_range(ranges, case.attrs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # loss broadcasting warnings
        out = op.reference(inputs, case.attrs).double()
    if case.attrs.get("correction"):  # var/std of one element with Bessel's correction: NaN, as in
        out = out[~out.isnan()]       # PyTorch (the rule's guard keeps it out of generated programs)
        if not out.numel():
            return
    slack = 1e-4 * (1 + out.abs().max().item())
    assert out.min().item() >= lo - slack and out.max().item() <= hi + slack, (lo, hi, out.min(), out.max())


def test_output_shape_reports_pytorch_reasons():
    conv = ops.get("conv2d")
    attrs = {"kernel_size": (3, 3), "stride": (1, 1), "dilation": (1, 1), "padding": (0, 0), "groups": 2,
             "out_channels": 4}
    with pytest.raises(ShapeError, match="divisible by groups"):
        conv.output_shape([(1, 3, 8, 8)], attrs)
    with pytest.raises(ShapeError, match="smaller than the kernel"):
        conv.output_shape([(1, 4, 2, 8)], attrs)
    assert conv.output_shape([(1, 4, 8, 8)], attrs) == (1, 4, 6, 6)
    assert conv.flops([(1, 4, 8, 8)], attrs) == 2 * 9 * 2 * (4 * 6 * 6)
    with pytest.raises(ShapeError, match="broadcast"):
        ops.get("add").output_shape([(2, 3), (4,)], {})
    with pytest.raises(ShapeError, match="inner dimensions"):
        ops.get("matmul").output_shape([(2, 3), (4, 5)], {})
    assert math.prod(ops.get("matmul").output_shape([(7, 2, 3), (3, 5)], {})) == 70
