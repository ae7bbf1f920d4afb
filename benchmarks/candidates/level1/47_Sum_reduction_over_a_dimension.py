import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_middle_kernel(x_ptr, out_ptr, R, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # x viewed as (B, R, C); out[b, c] = sum_r x[b, r, c]. Columns are contiguous, so each
    # program sums a strip of BLOCK_C columns down all R rows with coalesced loads.
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    base = x_ptr + b * R * C
    acc = tl.zeros((BLOCK_C,), tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        tile = tl.load(base + rows[:, None] * C + cols[None, :], mask=mask, other=0.0)
        acc += tl.sum(tile, axis=0)
    tl.store(out_ptr + b * C + cols, acc, mask=cols < C)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        dim = self.dim % x.dim()
        B = 1
        for s in x.shape[:dim]:
            B *= s
        R = x.shape[dim]
        C = 1
        for s in x.shape[dim + 1:]:
            C *= s
        out_shape = list(x.shape)
        out_shape[dim] = 1
        out = torch.empty(out_shape, device=x.device, dtype=x.dtype)
        grid = (B, triton.cdiv(C, 128))
        sum_middle_kernel[grid](x, out, R, C, BLOCK_R=32, BLOCK_C=128, num_warps=4)
        return out
