"""The Python forms capture traces composites through (drtriton/symbolic_forms.py): the same
results as PyTorch's own functions, and a batch that stays symbolic under torch.export."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

from drtriton.capture import capture_module  # noqa: E402
from drtriton.symbolic_forms import chain_matmul, kron, multi_dot, take_along_dim  # noqa: E402


@pytest.mark.parametrize("a,b", [((5, 5), (10, 20)), ((3,), (2, 4)), ((2, 3, 4), (5,)), ((2, 1, 3), (1, 4, 2)),
                                 ((), (3, 2))])
def test_kron_is_pytorchs(a, b):
    x, y = torch.randn(a), torch.randn(b)
    assert torch.equal(kron(x, y), torch.kron(x, y))
    assert torch.equal(kron(x.to(torch.int32), y), torch.kron(x.to(torch.int32), y))  # type promotion


@pytest.mark.parametrize("shapes", [[(4, 3), (3, 6)], [(3,), (3, 6), (6,)], [(3,), (3,)], [(4, 3), (3, 6), (6, 2), (2,)]])
def test_multi_dot_is_pytorchs(shapes):
    ts = [torch.randn(s, dtype=torch.float64) for s in shapes]
    got, want = multi_dot(ts), torch.linalg.multi_dot(ts)
    assert got.shape == want.shape and torch.allclose(got, want)


@pytest.mark.parametrize("a,i,dim", [((4, 10), (4, 3), 1), ((4, 6, 10), (4, 6, 3), -1), ((5, 5), (5, 5), 0),
                                     ((4, 1, 5), (1, 3, 5), 2), ((1, 7), (3, 2), 1)])
def test_take_along_dim_is_pytorchs(a, i, dim):
    x = torch.randn(a)
    idx = torch.randint(-x.shape[dim], x.shape[dim], i)  # negative indices count from the end
    assert torch.equal(take_along_dim(x, idx, dim), torch.take_along_dim(x, idx, dim))
    assert take_along_dim(x, idx) is NotImplemented  # flattened: PyTorch's own (it reads no size)


def test_what_a_form_does_not_handle_is_pytorchs_with_its_errors():
    assert multi_dot([torch.randn(2, 3)]) is NotImplemented  # one tensor: PyTorch's error, below
    assert chain_matmul(torch.randn(2, 3, 4), torch.randn(4, 2)) is NotImplemented
    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.linalg.multi_dot([x])
    with pytest.raises(Exception, match="at least 2"):
        capture_module(Model(), [torch.randn(2, 3)])


@pytest.mark.parametrize("call", ["torch.kron(x, y)", "x.kron(y)", "torch.linalg.multi_dot([x, y.mT, y])",
                                  "torch.chain_matmul(x, y.mT, y)",
                                  "torch.take_along_dim(x, (x[:, :2] * 3).long().abs() % 3, 1)"])
def test_the_batch_stays_symbolic(call):
    class Model(torch.nn.Module):
        def forward(self, x, y):
            return eval(call)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # chain_matmul is deprecated
        graph = capture_module(Model(), [torch.randn(4, 3), torch.randn(5, 3)])
    assert graph.values["x"].symbolic == [0], call
    [out] = graph.outputs
    assert 0 in graph.values[out].symbolic, call
