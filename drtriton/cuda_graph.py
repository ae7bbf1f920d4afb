"""Replaying a converted module's forward as a CUDA graph: an option for inference.

A converted network launches a hundred or more kernels per call, each with Python work on the
host (Triton's launcher, the autotuner's key, allocation); small inputs leave the GPU idle between
them. A CUDA graph records the launches of one call and replays them with one host call:

    from drtriton.cuda_graph import CUDAGraphed
    fast = CUDAGraphed(ModelNew(...).cuda().eval())
    with torch.no_grad():
        y = fast(x)          # first call per input signature: warm-up and capture; then replays

What replays is the GPU work of the captured call: a forward whose host code depends on input
values (`.item()`, a branch on data) cannot be captured or replays the captured branch, which is
why the verifier checks replays against the reference before it reports their speed. Inputs are
copied into the graph's own buffers and outputs are copied out of them, so callers may keep both.
Parameters are read where they live: updated in place (`load_state_dict`) a replay sees them,
replaced by new tensors it does not (make a new CUDAGraphed). Inference only: autograd does not
see a replay.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils import _pytree as pytree


def input_signature(args: tuple) -> tuple:
    """What a captured graph is valid for: the sizes, dtype and device of each tensor argument
    (values are copied into the graph's buffers, so layouts may differ), other arguments by value
    (a graph replays the work of the values it was captured with)."""
    key = []
    for a in args:
        if isinstance(a, torch.Tensor):
            key.append((tuple(a.shape), a.dtype, a.device))
        elif any(isinstance(t, torch.Tensor) for t in pytree.tree_leaves(a)):
            raise TypeError("CUDAGraphed takes tensors and plain values as arguments, not tensors inside "
                            f"a {type(a).__name__}")
        else:
            key.append(("value", repr(a)))
    return tuple(key)


@dataclass
class Captured:
    graph: torch.cuda.CUDAGraph
    inputs: list  # the graph's input buffers (tensors) and the other arguments
    outputs: object  # forward's output, in the graph's memory

    def replay(self, args: tuple):
        for buffer, a in zip(self.inputs, args):
            if isinstance(buffer, torch.Tensor):
                buffer.copy_(a)
        self.graph.replay()
        return pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, self.outputs)


class CUDAGraphed:
    """A module's forward as CUDA graphs, one per input signature, sharing one memory pool."""

    def __init__(self, module: torch.nn.Module, warmup: int = 2):
        self.module = module
        self.warmup = warmup  # calls before capture: Triton compiles and tunes outside the graph
        self.graphs: dict[tuple, Captured] = {}
        self._pool = None

    def __call__(self, *args):
        key = input_signature(args)
        captured = self.graphs.get(key)
        if captured is None:
            _check_inference(self.module, args)
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):  # warm-up off the default stream, as capture runs
                for _ in range(self.warmup):
                    self.module(*args)
            torch.cuda.current_stream().wait_stream(stream)
            captured = self.capture(args)
        return captured.replay(args)

    def capture(self, args: tuple) -> Captured:
        """Record one call of forward on copies of `args` (no warm-up: the caller's business)."""
        _check_inference(self.module, args)
        buffers = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
            outputs = self.module(*buffers)
        self._pool = graph.pool()
        captured = Captured(graph, buffers, outputs)
        self.graphs[input_signature(args)] = captured
        return captured


def _check_inference(module: torch.nn.Module, args: tuple) -> None:
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if not tensors or any(t.device.type != "cuda" for t in tensors):
        raise RuntimeError("CUDAGraphed needs the inputs on a CUDA device")
    if torch.is_grad_enabled() and (any(t.requires_grad for t in tensors)
                                    or any(p.requires_grad for p in module.parameters())):
        raise RuntimeError("CUDAGraphed replays inference only (autograd does not see a replay): "
                           "call it under torch.no_grad() or torch.inference_mode()")
