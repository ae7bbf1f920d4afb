"""Moving outputs from the candidate worker to the reference worker, as data, never pickles.

- CUDA tensors: a CUDA IPC handle (what torch.multiprocessing sends), so a 6 GB output is
  compared in place, with no copies. The reader checks that the declared shape fits inside the
  shared allocation before it touches it.
- CPU tensors (and CUDA if IPC is unavailable): raw bytes of a declared dtype and shape in a
  shared-memory file.

Either way the reader cannot be made to run code by what an untrusted worker wrote.
"""

from __future__ import annotations

import base64
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


def share(t: torch.Tensor, folder: str) -> dict:
    """A spec the other worker can open; the caller keeps `t` alive until it has."""
    if t.is_cuda:
        try:
            return _share_cuda(t)
        except Exception:  # no IPC in this environment: fall back to a file
            pass
    return write_tensor(t, folder)


def open_shared(spec: dict, device: str) -> torch.Tensor:
    if "ipc" in spec:
        return _open_cuda(spec)
    return read_tensor(spec, device)


def _b64(x):
    return None if x is None else base64.b64encode(x).decode()


def _unb64(x):
    return None if x is None else base64.b64decode(x)


def _share_cuda(t: torch.Tensor) -> dict:
    from torch.multiprocessing.reductions import reduce_tensor

    _, args = reduce_tensor(t)
    (_cls, size, stride, offset, _storage_cls, dtype, device, handle, size_bytes, offset_bytes,
     _grad, rc_handle, rc_offset, event_handle, event_sync) = args
    return {
        "shape": list(size), "dtype": str(dtype),
        "ipc": {"stride": list(stride), "offset": offset, "device": device, "handle": _b64(handle),
                "size_bytes": size_bytes, "offset_bytes": offset_bytes, "rc_handle": _b64(rc_handle),
                "rc_offset": rc_offset, "event_handle": _b64(event_handle), "event_sync": event_sync},
    }


def _open_cuda(spec: dict) -> torch.Tensor:
    from torch.multiprocessing.reductions import rebuild_cuda_tensor

    dtype = _DTYPES[spec["dtype"]]
    ipc = spec["ipc"]
    shape, stride, offset = [int(s) for s in spec["shape"]], [int(s) for s in ipc["stride"]], int(ipc["offset"])
    itemsize = torch.empty((), dtype=dtype).element_size()
    last = offset + sum((n - 1) * st for n, st in zip(shape, stride)) if all(shape) else offset
    if offset < 0 or min(stride, default=0) < 0 or (all(shape) and (last + 1) * itemsize > int(ipc["size_bytes"])):
        raise ValueError("shared output does not fit in its allocation")
    return rebuild_cuda_tensor(
        torch.Tensor, torch.Size(shape), tuple(stride), offset, torch.storage.TypedStorage, dtype,
        int(ipc["device"]), _unb64(ipc["handle"]), int(ipc["size_bytes"]), int(ipc["offset_bytes"]),
        False, _unb64(ipc["rc_handle"]), int(ipc["rc_offset"]), _unb64(ipc["event_handle"]),
        bool(ipc["event_sync"]),
    )


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
        if "path" in s:
            try:
                os.unlink(s["path"])
            except OSError:
                pass
