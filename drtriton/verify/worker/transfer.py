"""Moving outputs between workers as raw bytes in shared-memory files.

Raw bytes of a declared dtype and shape, never pickles: the reader cannot be made to run code by
what an untrusted worker wrote. Large GPU outputs cost one device-to-host copy on each side.
"""

from __future__ import annotations

import os
import uuid

import torch

_DTYPES = {str(d): d for d in (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
    torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64,
)}


def flatten_outputs(out) -> list[torch.Tensor] | None:
    """A forward's result as a list of tensors; None if it holds anything else."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        flat = []
        for o in out:
            sub = flatten_outputs(o)
            if sub is None:
                return None
            flat += sub
        return flat
    return None


def write_tensor(t: torch.Tensor, folder: str) -> dict:
    path = os.path.join(folder, f"t-{uuid.uuid4().hex}.bin")
    flat = t.detach().reshape(-1)
    shared = torch.from_file(path, shared=True, size=max(flat.numel(), 1), dtype=t.dtype)
    if flat.numel():
        shared[: flat.numel()].copy_(flat)
    return {"path": path, "shape": list(t.shape), "dtype": str(t.dtype)}


def read_tensor(spec: dict, device: str) -> torch.Tensor:
    dtype = _DTYPES.get(spec["dtype"])
    if dtype is None:
        raise ValueError(f"unsupported output dtype {spec['dtype']}")
    shape = [int(s) for s in spec["shape"]]
    numel = 1
    for s in shape:
        numel *= s
    expected = max(numel, 1) * torch.empty((), dtype=dtype).element_size()
    if os.path.getsize(spec["path"]) != expected:
        raise ValueError("output file has the wrong size")
    data = torch.from_file(spec["path"], shared=False, size=max(numel, 1), dtype=dtype)
    return data[:numel].reshape(shape).to(device)


def remove(specs: list[dict]) -> None:
    for s in specs:
        try:
            os.unlink(s["path"])
        except OSError:
            pass
