"""Kernels in an assembled module: those identical up to names are emitted once (a network's
repeated blocks compile and tune once), and the launches of the others go to it; a
model-written fragment (imports, a class, an instance, kernels) is kept whole, whatever it holds."""

import re

from drtriton.policy.module import hoist_module_paths, share_kernels

KERNEL = '''@triton.jit
def {name}(x_ptr, {out}, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    {val} = tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0)
    tl.store({out} + offs, {val}, mask=offs < n)'''

OTHER = '''@triton.jit
def {name}(x_ptr, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.exp(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)'''


def test_repeated_kernels_are_emitted_once():
    kernels = [KERNEL.format(name="relu_kernel", out="relu_out", val="relu"),
               KERNEL.format(name="relu_kernel2", out="relu_1_out", val="relu_1"),
               OTHER.format(name="exp_kernel")]
    lines = ["relu_kernel[grid](x, relu, n)", "relu_kernel2[grid](relu, relu_1, n)", "exp_kernel[grid](relu_1, e, n)"]
    kept, launched = share_kernels(kernels, lines)
    assert [re.search(r"def (\w+)\(", k).group(1) for k in kept] == ["relu_kernel", "exp_kernel"]
    assert launched == ["relu_kernel[grid](x, relu, n)", "relu_kernel[grid](relu, relu_1, n)",
                        "exp_kernel[grid](relu_1, e, n)"]


def test_kernels_calling_different_helpers_are_different_kernels():
    """Elementwise templates may call device helpers (a recurrence's loop): a kernel calling the
    Chebyshev helper is not one calling the Legendre helper, whatever else they share."""
    call = KERNEL.replace("tl.maximum(", "{helper}(").replace(", 0.0)", ", 3.0)")
    kernels = [call.format(name="t_kernel", out="t_out", val="t", helper="_chebyshev_polynomial_t"),
               call.format(name="p_kernel", out="p_out", val="p", helper="_legendre_polynomial_p"),
               call.format(name="t_kernel2", out="t2_out", val="t2", helper="_chebyshev_polynomial_t")]
    lines = ["t_kernel[grid](x, t, n)", "p_kernel[grid](x, p, n)", "t_kernel2[grid](x, t2, n)"]
    kept, launched = share_kernels(kernels, lines)
    assert [re.search(r"def (\w+)\(", k).group(1) for k in kept] == ["t_kernel", "p_kernel"]
    assert launched == ["t_kernel[grid](x, t, n)", "p_kernel[grid](x, p, n)", "t_kernel[grid](x, t2, n)"]


def test_model_written_fragments_are_kept_whole():
    # two fragments a model wrote the same way, embedded under their own prefixes: each defines
    # its own instance, which forward calls; merging them by their first kernel would drop one
    chunk = '''# written by the openai policy for a fragment; its names carry the prefix {p}
import torch

{kernel}

class {p}ModelNew(torch.nn.Module):
    def forward(self, x):
        return x

{p}module = {p}ModelNew()'''
    first = chunk.format(p="_f1_", kernel=KERNEL.format(name="_f1_relu_kernel", out="out", val="v"))
    second = chunk.format(p="_f2_", kernel=KERNEL.format(name="_f2_relu_kernel", out="out", val="v"))
    lines = ["a = _f1_module(x)", "b = _f2_module(a)"]
    assert share_kernels([first, second], lines) == ([first, second], lines)


def test_shared_module_paths_are_looked_up_once_per_call():
    """Paths where uses branch become locals at the top of forward; a path used once, or only
    through one longer path, stays as it was; names that only contain `self` are left alone."""
    lines = ["y = k[(1,)](x, self.net[0].bn.weight, self.net[0].bn.bias, self.net[1].conv.weight)",
             "z = k[(1,)](y, self.head.fc.weight, self.head.fc.weight.shape[0], myself.net[0], self.training)"]
    out = hoist_module_paths(lines)
    assert out[1:4] == ["_path0 = self.net", "_path1 = _path0[0].bn", "_path2 = self.head.fc.weight"]
    assert out[4] == "y = k[(1,)](x, _path1.weight, _path1.bias, _path0[1].conv.weight)"
    assert out[5] == "z = k[(1,)](y, _path2, _path2.shape[0], myself.net[0], self.training)"
    # a buffer two kernels read is one local; an attribute forward assigns is looked up each time
    buffers = ["_c = self.cos", "k(_c)", "_c = self.cos", "self.n += 1", "y = self.n * 2", "self.n = self.n + 1"]
    assert hoist_module_paths(buffers)[1:] == ["_path0 = self.cos", "_c = _path0", "k(_c)", "_c = _path0", *buffers[3:]]
    assert hoist_module_paths(["y = f(self.a.b, x)"]) == ["y = f(self.a.b, x)"]
    # string literals and comments are text: neither counted nor rewritten
    quoted = ['y = f(self.a.b.w, "self.a.b.v")  # self.a.b.u', "z = g(self.c.d)"]
    assert hoist_module_paths(quoted) == quoted
    mixed = ['y = f(self.a.b.w, self.a.b.v, "self.a.b.v")']
    assert hoist_module_paths(mixed)[1:] == ["_path0 = self.a.b", 'y = f(_path0.w, _path0.v, "self.a.b.v")']
