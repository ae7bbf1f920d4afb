"""Python forms of the composite operators whose C++ code reads sizes as plain integers.

Under `torch.export` such code fixes a symbolic batch to the traced number (`kron` reshapes to
the sizes it read, `take_along_dim` broadcasts to them; `multi_dot` and `chain_matmul` choose their order of products from them), so
a converted module would only take the batch it was converted at. Traced through these forms
instead (`SymbolicForms`, a torch-function mode around export), the sizes stay expressions. Each
form falls back to PyTorch's own function for what it does not handle, so errors are PyTorch's.
"""

from __future__ import annotations

import functools

import torch
from torch.overrides import TorchFunctionMode


def kron(a, b, *, out=None):
    """`a` with a size-1 axis after each of its dims, times `b` with one before each: the
    interleaved product, then each pair of axes merged (as the C++ does, with symbolic sizes)."""
    if out is not None or not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return NotImplemented
    rank = max(a.dim(), b.dim())
    sa = [1] * (rank - a.dim()) + list(a.shape)
    sb = [1] * (rank - b.dim()) + list(b.shape)
    spread_a = a.reshape([s for size in sa for s in (size, 1)])
    spread_b = b.reshape([s for size in sb for s in (1, size)])
    return (spread_a * spread_b).reshape([x * y for x, y in zip(sa, sb)])


def take_along_dim(input, indices, dim=None, *, out=None):
    """`gather` after broadcasting the two but along `dim` (the C++ broadcasts with the sizes it
    read); negative indices count from the end, as the C++ wraps them."""
    if out is not None or dim is None or not (isinstance(input, torch.Tensor) and isinstance(indices, torch.Tensor)) \
            or input.dim() != indices.dim() or input.dim() == 0:
        return NotImplemented
    dim = dim % input.dim()
    along = list(input.shape)
    along[dim] = indices.shape[dim]
    indices = indices.broadcast_to(torch.broadcast_shapes(along, indices.shape))
    along = list(indices.shape)
    along[dim] = input.shape[dim]
    input = input.broadcast_to(torch.broadcast_shapes(along, input.shape))
    return input.gather(dim, indices.remainder(input.shape[dim]))


def multi_dot(tensors, *, out=None):
    """The products left to right (PyTorch picks the cheapest order from the sizes); a 1-D first
    operand is a row vector and a 1-D last one a column vector, squeezed from the result."""
    ts = list(tensors) if isinstance(tensors, (list, tuple)) else None
    if out is not None or ts is None or len(ts) < 2 or not all(isinstance(t, torch.Tensor) for t in ts) \
            or ts[0].dim() not in (1, 2) or ts[-1].dim() not in (1, 2) or any(t.dim() != 2 for t in ts[1:-1]):
        return NotImplemented
    first, last = ts[0].dim() == 1, ts[-1].dim() == 1
    ts[0] = ts[0].unsqueeze(0) if first else ts[0]
    ts[-1] = ts[-1].unsqueeze(-1) if last else ts[-1]
    result = functools.reduce(torch.mm, ts)
    result = result.squeeze(0) if first else result
    return result.squeeze(-1) if last else result


def chain_matmul(*matrices, out=None):
    if out is not None or len(matrices) < 2 or not all(isinstance(m, torch.Tensor) and m.dim() == 2
                                                       for m in matrices):
        return NotImplemented
    return functools.reduce(torch.mm, matrices)


FORMS = {
    torch.kron: kron, torch.Tensor.kron: kron,
    torch.take_along_dim: take_along_dim, torch.Tensor.take_along_dim: take_along_dim,
    torch.linalg.multi_dot: multi_dot,
    torch.chain_matmul: chain_matmul,
}


class SymbolicForms(TorchFunctionMode):
    """Calls to the functions of `FORMS` run their Python forms (inside, this mode is off)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        form = FORMS.get(func)
        if form is not None:
            result = form(*args, **kwargs)
            if result is not NotImplemented:
                return result
        return func(*args, **kwargs)
