"""A problem built inside a worker: its source imported from a file, the reference module, inputs.

Both worker roles build problems the same way from the same seeds, so the reference worker and
the candidate worker see identical parameters and inputs without shipping them; fingerprints
prove it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import random
import secrets
import sys
from collections import OrderedDict

import torch

_INTEGERS = tuple(getattr(torch, name) for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                                    "uint64") if hasattr(torch, name))


def _integers(v) -> bool:
    """A tensor of integers with elements (what may index or bound the batch)."""
    return isinstance(v, torch.Tensor) and v.dtype in _INTEGERS and v.numel() > 0


def _bounds(v, m: int, n: int) -> bool:
    """Whether `v` looks like segment bounds over a batch of n: integers, sorted along its last
    dim, each row from 0, some past m (the halved batch) and none past n."""
    if not _integers(v) or v.dim() == 0 or v.shape[-1] < 2:
        return False
    top = int(v.max())
    return m < top <= n and bool((v[..., 0] == 0).all()) and bool((v[..., 1:] >= v[..., :-1]).all())


class ProblemFault(Exception):
    """The problem (not the candidate) is broken: the message says what to fix."""


def import_source(source: str, module_name: str, folder: str):
    """Import a source from a real file: Triton reads kernel sources back through `inspect`."""
    path = os.path.join(folder, f"{module_name}.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(seed % 2**32)


def forget_seed() -> None:
    """Reseed from the OS so nothing that runs next can recover the seed the inputs came from."""
    seed_everything(secrets.randbits(62))


def fingerprint(values) -> str:
    """A digest of inputs or outputs; large tensors are sampled at a fixed stride."""
    h = hashlib.blake2b(digest_size=16)
    for v in values:
        if isinstance(v, torch.Tensor):
            h.update(f"{tuple(v.shape)}{v.dtype}".encode())
            flat = v.detach().reshape(-1)
            if flat.numel() > 1 << 22:
                flat = flat[:: flat.numel() // (1 << 22) + 1]
            h.update(flat.contiguous().cpu().view(torch.uint8).numpy().tobytes())
        else:
            h.update(repr(v).encode())
    return h.hexdigest()


def describe_error(e: BaseException, source_file: str | None = None, limit: int = 1200) -> str:
    """`Type: message` plus the innermost line of `source_file` that raised it, when there is one."""
    text = f"{type(e).__name__}: {e}".strip()
    if source_file:
        tb = e.__traceback__
        where = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == source_file:
                where = tb.tb_lineno
            tb = tb.tb_next
        if where is not None:
            text = f"line {where}: {text}"
    return text if len(text) <= limit else text[:limit] + " ..."


def move(value, device: str):
    return value.to(device) if isinstance(value, torch.Tensor) else value


def _copy_state(state: dict) -> dict:
    """A detached copy of a state dict that keeps its per-module metadata: modules that version
    their state (torchvision's MNASNet) refuse to load one without."""
    copy = OrderedDict((k, v.detach().clone()) for k, v in state.items())
    copy._metadata = getattr(state, "_metadata", None)  # type: ignore[attr-defined]
    if copy._metadata is None:
        del copy._metadata
    return copy


def sizes_follow_data(model, inputs: list) -> bool:
    """Whether forward makes a tensor whose size depends on the input values (x[mask], nonzero,
    unique): forward on fake tensors (shapes only, no compute) stops at the first such operator.
    Anything else that stops it (a value read with `.item()`, an unsupported operator) says no."""
    from torch._subclasses.fake_tensor import DynamicOutputShapeException, FakeTensorMode

    try:
        with FakeTensorMode(allow_non_fake_inputs=True) as mode, torch.no_grad():
            model(*[mode.from_tensor(x) if isinstance(x, torch.Tensor) else x for x in inputs])
    except DynamicOutputShapeException:
        return True
    except Exception:
        return False
    return False


class ProblemRuntime:
    """The problem's module, its reference model (seeded, on `device`) and its input maker."""

    def __init__(self, problem: dict, device: str, folder: str, init_seed: int, training: bool | None):
        self.problem = problem
        self.device = device
        name = f"drtriton_problem_{hashlib.sha1(problem['source'].encode()).hexdigest()[:10]}"
        self.source_file = os.path.join(folder, f"{name}.py")
        try:
            self.module = import_source(problem["source"], name, folder)
        except Exception as e:
            raise ProblemFault(f"the problem's file fails to import: {describe_error(e, self.source_file)}")
        self.cls = getattr(self.module, problem["class_name"])
        self.get_inputs = getattr(self.module, problem["inputs_fn"])
        self.init_args = self._init_args()
        self.init_seed = init_seed
        self.model = self.build(self.cls)
        self._materialize_lazy(self.model)
        if training is not None:  # else the modes the constructor left (eval() on a block stays)
            self.model.train(training)
        # As constructed: forward calls in training mode move buffers (batch-norm statistics),
        # and every candidate must start from the same state as the reference.
        self.initial_state = _copy_state(self.model.state_dict())
        self.initial_fingerprint = fingerprint(list(self.initial_state.values())) if device != "meta" else ""
        self.sizes_follow_data: bool | None = None  # decided at the first reference call

    def _init_args(self) -> list:
        fn_name = self.problem.get("init_inputs_fn")
        if not fn_name:
            return []
        try:
            args = getattr(self.module, fn_name)()
        except Exception as e:
            raise ProblemFault(f"{fn_name}() raised {describe_error(e, self.source_file)}")
        if not isinstance(args, (list, tuple)):
            raise ProblemFault(f"{fn_name}() must return a list of constructor arguments, not {type(args).__name__}")
        return list(args)

    def build(self, cls) -> torch.nn.Module:
        """Construct from the init seed, directly on the device (fast for large layers, and
        deterministic: both workers draw the same values)."""
        seed_everything(self.init_seed)
        with torch.device(self.device):
            model = cls(*self.init_args)
        return model.to(self.device)

    def _materialize_lazy(self, model: torch.nn.Module) -> None:
        """Lazy layers (`nn.LazyLinear`, `nn.LazyConv2d`) take their sizes from their first
        forward: one on the problem's inputs, in eval mode (no statistics move), from the init
        seed again (both workers draw the same values). A candidate's lazy layers take the
        reference's state (their load hook sizes them)."""
        from torch.nn.parameter import is_lazy

        if not any(is_lazy(t) for t in [*model.parameters(), *model.buffers()]):
            return
        inputs, _ = self.make_inputs(0, fingerprinted=False)
        modes = {name: m.training for name, m in model.named_modules()}
        model.eval()
        seed_everything(self.init_seed)
        try:
            with torch.no_grad():
                model(*inputs)
        except Exception as e:
            raise ProblemFault(f"a lazy layer's first forward (which sizes it) raised {describe_error(e, self.source_file)}")
        finally:
            forget_seed()
        for name, m in model.named_modules():
            m.training = modes.get(name, m.training)

    def match_modes(self, model: torch.nn.Module) -> None:
        """Put `model` (a candidate, or a rebuilt reference) in the reference's training and eval
        modes, submodule by submodule (by name), as the reference is verified."""
        modes = {name: m.training for name, m in self.model.named_modules()}
        for name, m in model.named_modules():
            if name in modes:
                m.training = modes[name]

    def check_signature(self, inputs: list) -> None:
        try:
            inspect.signature(self.model.forward).bind(*inputs)
        except TypeError as e:
            params = ", ".join(inspect.signature(self.model.forward).parameters)
            raise ProblemFault(
                f"{self.problem['inputs_fn']}() returns {len(inputs)} values but "
                f"{self.problem['class_name']}.forward takes ({params}): {e}"
            )

    def make_inputs(self, seed: int, fingerprinted: bool = True) -> tuple[list, str]:
        """Inputs for one trial, on the device, and their fingerprint (not taken, "", when not
        `fingerprinted`: it reads the inputs back to the host, too slow for every timed call)."""
        seed_everything(seed)
        fn = self.problem["inputs_fn"]
        try:
            with torch.device(self.device):  # torch.rand & co. draw on the device: fast
                values = self.get_inputs()
        except Exception as e:
            raise ProblemFault(f"{fn}() raised {describe_error(e, self.source_file)}")
        finally:
            forget_seed()
        if not isinstance(values, (list, tuple)):
            raise ProblemFault(f"{fn}() must return a list of forward arguments, not {type(values).__name__}")
        values = list(values)
        values = [move(v, self.device) for v in values]
        return values, (fingerprint(values) if fingerprinted and self.device != "meta" else "")

    def make_other_inputs(self, seed: int) -> tuple[list, str, int, int] | str:
        """Inputs for the second configuration of a trial (a drop-in takes other batch sizes):
        the inputs for `seed` with the leading dimension of every tensor that shares the first
        tensor input's leading size changed, halved when it is at least 2 (its first rows, in a
        tensor of their own), else 2 (the new row drawn by `get_inputs` for the next seed);
        other arguments unchanged. Returns (inputs, fingerprint, old size, new size), or why there
        is none (no first tensor input with a leading dimension; an integer input may index the
        batch)."""
        values, _ = self.make_inputs(seed)
        first = next((v for v in values if isinstance(v, torch.Tensor)), None)
        if first is None or first.dim() == 0 or first.shape[0] == 0:
            return "no tensor input with a leading dimension"
        n = first.shape[0]
        m = n // 2 if n >= 2 else 2

        def batched(v) -> bool:
            return isinstance(v, torch.Tensor) and v.dim() >= 1 and v.shape[0] == n

        if m < n:
            # an integer input whose values all lie below the batch size may index the batch
            # (a permutation of it, beam origins): its first m rows would point past the halved
            # tensors, and on the GPU an index out of range is a device-side assert that breaks
            # the worker's CUDA context. No second configuration then.
            if any(batched(v) and _integers(v) and int(v.min()) >= 0 and int(v.max()) < n for v in values):
                return f"an integer input may index the batch (its values lie below {n})"
            # sorted offsets from 0 that reach past the halved batch (segment bounds, EmbeddingBag's
            # offsets): kept whole, they would bound segments past its end, which PyTorch does not
            # check (the reference would read memory that is not the input's)
            if any(_bounds(v, m, n) for v in values if not batched(v)):
                return f"an integer input may bound segments of the batch (sorted offsets up to {n})"
            values = [v[:m].clone() if batched(v) else v for v in values]
        else:
            more, _ = self.make_inputs((seed + 1) % 2**62)
            if len(more) != len(values):
                more = values
            values = [
                torch.cat([v, w if isinstance(w, torch.Tensor) and w.shape == v.shape and w.dtype == v.dtype
                           and w.device == v.device else v])[:m] if batched(v) else v
                for v, w in zip(values, more)
            ]
        return values, (fingerprint(values) if self.device != "meta" else ""), n, m
