"""Kernels in an assembled module: those identical up to names are emitted once (a network's
repeated blocks compile and tune once), and each is named after its content, so the same kernel
has the same source in a fragment's check and in every plan of the module: Triton's on-disk
cache then compiles it once for all of them."""

import re

from drtriton.policy.module import share_kernels

KERNEL = '''@triton.jit
def {name}(x_ptr, {out}, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    {val} = tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0)
    tl.store({out} + offs, {val}, mask=offs < n)'''

OTHER = '''@triton.jit
def {name}(x_ptr, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.exp(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)'''


def _names(kernels):
    return [re.search(r"def (\w+)\(", k).group(1) for k in kernels]


def test_repeated_kernels_are_emitted_once_under_a_content_name():
    kernels = [KERNEL.format(name="relu_kernel", out="relu_out", val="relu"),
               KERNEL.format(name="relu_kernel2", out="relu_1_out", val="relu_1"),
               OTHER.format(name="exp_kernel")]
    lines = ["relu_kernel[grid](x, relu, n)", "relu_kernel2[grid](relu, relu_1, n)", "exp_kernel[grid](relu_1, e, n)"]
    kept, launched = share_kernels(kernels, lines)
    relu, exp = _names(kept)
    assert len(kept) == 2 and re.fullmatch(r"relu_kernel_[0-9a-f]{6}", relu) and re.fullmatch(r"exp_kernel_[0-9a-f]{6}", exp)
    assert launched == [f"{relu}[grid](x, relu, n)", f"{relu}[grid](relu, relu_1, n)", f"{exp}[grid](relu_1, e, n)"]


def test_the_same_kernel_gets_the_same_name_in_any_module():
    alone, _ = share_kernels([KERNEL.format(name="relu_kernel", out="relu_out", val="relu")], [])
    # numbered otherwise in a larger module (the third kernel of its kind)
    among, _ = share_kernels([OTHER.format(name="relu_kernel"), OTHER.format(name="relu_kernel2").replace("exp", "sin"),
                              KERNEL.format(name="relu_kernel3", out="relu_out", val="relu")], [])
    assert among[2] == alone[0]  # the same text: one compilation serves both
    assert _names(among)[0] != _names(among)[1]  # different kernels, different names
