"""The operator record every other part of DRTriton reads (synthesis, capture, the built-in policy).

Nothing here imports torch or OR-Tools at import time: the language server and the built-in
policy import the vocabulary on their hot path. ``reference``/``build_module`` import torch and
``constrain`` imports OR-Tools when called.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, Union

from drtriton.ops.ranges import UNBOUNDED, Range
from drtriton.ops.shape import ConcreteContext, Dim, RankContext, ShapeContext, ShapeError

#: The fixed set of categories (``Operator.category``).
CATEGORIES: tuple[str, ...] = (
    "elementwise_unary", "elementwise_binary", "matmul", "conv", "pool",
    "norm", "softmax", "reduction", "scan", "sort", "loss", "indexing", "recurrent", "factorization",
)

#: Ranks a generated tensor may have. Rank 5 is the largest an operator here needs (conv3d).
ANY_RANK: tuple[int, ...] = (0, 1, 2, 3, 4, 5)

#: Value domains of tensor inputs: what a fresh input is drawn from, and which existing tensors
#: may feed the slot (by their value range).
#: real: torch.randn; positive: torch.rand + 0.5 (a safe divisor); unit: torch.rand (probabilities,
#: targets in [0, 1]); index: torch.randint class indices (never fed by another operator); mask:
#: booleans, torch.rand > 0.5 (where's condition, logical operators); above_one: torch.rand + 1
#: (acosh's argument; no glue maps into it, so its operators are not drawn); probability: torch.rand,
#: and no other value ever (ndtri's argument: open (0, 1); not drawn either); integer: torch.randint
#: of both signs, int64 (the bitwise operators; not drawn); offsets: where each segment of the
#: slot `index_of` names starts, sorted, from 0 to that size (segment_reduce; never fed by another
#: operator, as index); ends: where each group of the slot `index_of` names ends, sorted, each
#: from 0 to that size (grouped_mm: rows past the last end belong to no group; never fed either).
DOMAINS: tuple[str, ...] = ("real", "positive", "unit", "index", "mask", "above_one", "probability", "integer",
                            "offsets", "ends")
#: domains whose tensors are drawn fresh for their slot, never another operator's result
FRESH_ONLY: tuple[str, ...] = ("index", "offsets", "ends")

RuleFn = Callable[[ShapeContext, list, Mapping[str, Any]], tuple[list, Dim]]
Template = Union[str, Callable[[Mapping[str, Any]], str]]


@dataclass(frozen=True)
class Slot:
    """One tensor input of an operator."""

    name: str
    ranks: tuple[int, ...] = ANY_RANK
    domain: str = "real"
    #: for ``index`` slots: (slot, axis) whose size bounds the class indices
    index_of: tuple[int, int] | None = None


# --------------------------------------------------------------------------------------------
# Attribute spaces: small, declarative, so docs and samplers come from one description.


@dataclass(frozen=True)
class Choice:
    """``name`` takes one of ``values`` (uniformly). A tuple ``name`` draws several attributes
    jointly from tuples of values (e.g. a (min, max) pair). ``valid(value, ranks)`` filters by
    the input ranks."""

    name: str | tuple[str, ...]
    values: tuple
    valid: Callable[[Any, Sequence[int]], bool] | None = None

    def sample(self, rng: random.Random, ranks: Sequence[int]) -> dict[str, Any]:
        values = [v for v in self.values if self.valid is None or self.valid(v, ranks)]
        if not values:
            raise ShapeError(f"no admissible {self.name} for input ranks {tuple(ranks)}")
        value = rng.choice(values)
        if isinstance(self.name, tuple):
            return dict(zip(self.name, value))
        return {self.name: value}

    def describe(self) -> str:
        name = self.name if isinstance(self.name, str) else "(" + ", ".join(self.name) + ")"
        return f"{name} in {_values_text(self.values)}"


@dataclass(frozen=True)
class Axis:
    """An axis of the first input (``dim``). ``multi``: a sorted tuple of 1 to 3 distinct axes
    (rendered as an int when there is one)."""

    name: str = "dim"
    multi: bool = False

    def sample(self, rng: random.Random, ranks: Sequence[int]) -> dict[str, Any]:
        rank = ranks[0]
        if rank < 1:
            raise ShapeError(f"{self.name} needs an input of rank >= 1")
        if not self.multi:
            return {self.name: rng.randrange(rank)}
        count = rng.randint(1, min(3, rank))
        axes = tuple(sorted(rng.sample(range(rank), count)))
        return {self.name: axes[0] if count == 1 else axes}

    def describe(self) -> str:
        return f"{self.name}: {'1-3 axes' if self.multi else 'an axis'} of the input"


@dataclass(frozen=True)
class Spatial:
    """A tuple with one entry per spatial dimension (``n`` of them), e.g. ``kernel_size``;
    the entries are equal with probability ``1 - asym``."""

    name: str
    values: tuple[int, ...]
    n: int
    asym: float = 0.25

    def sample(self, rng: random.Random, ranks: Sequence[int]) -> dict[str, Any]:
        if self.n > 1 and rng.random() < self.asym:
            return {self.name: tuple(rng.choice(self.values) for _ in range(self.n))}
        return {self.name: (rng.choice(self.values),) * self.n}

    def describe(self) -> str:
        return f"{self.name}: {self.n}-tuple from {_values_text(self.values)}"


AttrSpec = Union[Choice, Axis, Spatial]


def _values_text(values: tuple) -> str:
    """``{a, b, c}``; repeated values weight the draw, which the text says."""
    distinct = dict.fromkeys(values)
    text = "{" + ", ".join(_fmt(v) for v in distinct) + "}"
    return text + (" (weighted)" if len(distinct) < len(values) else "")


@dataclass(frozen=True)
class Param:
    """A size the solver chooses (``out_channels``, ``padding``); stored in attrs after solving."""

    name: str
    doc: str
    per_spatial: bool = False
    #: values the property tests draw from (they include ones PyTorch rejects)
    test_range: tuple[int, int] = (0, 6)


@dataclass(frozen=True)
class ModuleCall:
    """How to construct an operator's ``nn.Module``: ``cls(*args, **kwargs)``.

    ``args`` are the size arguments (``in_channels``, ``out_features``, ``normalized_shape``) that
    generated programs expose as ``__init__`` arguments, KernelBench style; ``kwargs`` are
    rendered as literals."""

    cls: str
    args: tuple[tuple[str, Any], ...]
    kwargs: tuple[tuple[str, Any], ...] = ()

    def render(self, arg_names: Sequence[str] | None = None) -> str:
        parts = [arg_names[i] if arg_names else _fmt(v) for i, (_, v) in enumerate(self.args)]
        parts += [f"{k}={_fmt(v)}" for k, v in self.kwargs]
        return f"{self.cls}({', '.join(parts)})"


ModuleFn = Callable[[Mapping[str, Any], Sequence[Sequence[int]]], ModuleCall]
RangeFn = Callable[[Sequence[Range], Mapping[str, Any]], Range]
AxesFn = Callable[[Mapping[str, Any], int], "frozenset[int] | None"]
#: fresh(rng, slot, anchor_slot, anchor_rank) -> dims of a new input for ``slot``; each entry is
#: "free" (a new size), "one" (the constant 1) or an int (the same size as that anchor axis)
FreshFn = Callable[[random.Random, int, int, int], list]

INPUT_NAMES = ("x", "y", "z", "w")


def float_source(value: float) -> str:
    """A float as Python source: its repr, except inf and nan, whose repr is a bare name that
    generated code does not define."""
    return repr(value) if math.isfinite(value) else f'float("{value}")'


def _fmt(value: Any) -> str:
    """Python source for an attribute value."""
    if isinstance(value, float):
        return float_source(value)
    if isinstance(value, list):
        value = tuple(value)
    return repr(value)


class _KeepField(dict):
    """format_map mapping that leaves unknown fields (``{x}``, ``{y}``) in place."""

    def __missing__(self, key):
        return "{" + key + "}"


def _fill(template: Template, attrs: Mapping[str, Any], fields: Mapping[str, str]) -> str:
    """Fill a template: attributes as Python literals, ``fields`` verbatim, others left open."""
    text = template(attrs) if callable(template) else template
    values = _KeepField({k: _fmt(v) for k, v in attrs.items()})
    values.update(fields)
    return text.format_map(values)


@dataclass(frozen=True)
class Operator:
    """One primitive PyTorch operator of the vocabulary.

    Identity and structure
      - ``name``: vocabulary name (snake_case, e.g. ``conv_transpose3d``).
      - ``category``: one of :data:`CATEGORIES`.
      - ``slots``: the tensor inputs (``arity`` = their number; parameters are not counted),
        each with admissible ranks and a value domain (:data:`DOMAINS`).
      - ``attrs``: the attribute space (:class:`Choice`/:class:`Axis`/:class:`Spatial`), sampled
        by ``sample_attrs``; ``params``: sizes the CP-SAT solver picks (``out_channels``,
        ``padding``), also stored in the attrs dict of a concrete instance.

    Shapes and cost (one rule, three back ends: see ``drtriton.ops.shape``)
      - ``rule(ctx, input_dims, attrs) -> (output_dims, flops)``.
      - ``output_shape(input_shapes, attrs)`` raises :class:`ShapeError` (a ValueError) with
        PyTorch's reason when PyTorch would reject the shapes; ``flops(...)``;
        ``output_rank(ranks, attrs)``; ``constrain(model, input_dims, attrs)`` the CP-SAT form.

    Code
      - ``torch_template``: the forward expression over ``{x}``, ``{y}``, ``{z}``, ``{w}`` (inputs),
        attributes by name and ``{module}`` (the module attribute); ``torch_expr`` fills it.
      - ``module(attrs, input_shapes) -> ModuleCall`` for operators with weights (module form in
        generated programs, KernelBench style); ``module_expr`` renders it.
      - ``reference(inputs, attrs, module)`` evaluates ``torch_expr`` eagerly.
      - ``triton_template`` (elementwise operators only): a Triton scalar expression over ``{x}``
        (and ``{y}``) using ``tl.*`` only; ``triton_expr(attrs)`` fills in the attributes. Treat
        ``{x}``/``{y}`` as names: bind inputs to variables before substituting, as a placeholder
        may occur several times. ``triton_helpers``: sources of ``@triton.jit`` functions the
        template calls (a loop, which one expression cannot hold: a recurrence), defined once per
        module (``drtriton.ops.called_helpers``); their names start with ``_``.

    Capture (mapping a traced module back onto the vocabulary)
      - ``torch_functions``: qualified names of callables meaning this op
        (``"torch.relu"``, ``"torch.nn.functional.relu"``, ``"operator.add"``);
        ``tensor_methods``: Tensor method names (``"relu"``, ``"__add__"``);
        ``module_types``: qualified ``nn.Module`` classes (``"torch.nn.ReLU"``). Several
        operators may share a callable (``operator.add`` is ``add`` on two tensors and
        ``add_scalar`` with a number; ``torch.max`` is a reduction with ``dim`` and ``maximum``
        with a tensor): the capture pass disambiguates by argument types.

    Generation hints
      - ``value_range(input_ranges, attrs) -> (lo, hi)``: interval of output values
        (elementwise operators derive it from ``triton_template``); ``out_dtype``.
      - ``same_rank``, ``rank_rule``: rank relations between slots; ``fresh``: how a new input
        is shaped relative to an existing one (broadcast patterns, matmul operands).
      - ``commutative``; ``normalizes``/``reduces``: axes an op normalises / sums over, so the
        generator avoids constant programs like ``softmax(x, 1).sum(1)``; ``drawn``: whether
        synthesis draws it at all (``SYNTH_NAMES``).
    """

    name: str
    category: str
    slots: tuple[Slot, ...]
    rule: RuleFn
    torch_template: Template
    description: str = ""
    attrs: tuple[AttrSpec, ...] = ()
    params: tuple[Param, ...] = ()
    module: ModuleFn | None = None
    triton_template: Template | None = None
    triton_helpers: tuple[str, ...] = ()
    torch_functions: tuple[str, ...] = ()
    tensor_methods: tuple[str, ...] = ()
    module_types: tuple[str, ...] = ()
    value_range: RangeFn | None = None
    out_dtype: str = "float32"
    same_rank: bool = False
    rank_rule: Callable[[int, Mapping[int, int]], tuple[int, ...]] | None = None
    fresh: FreshFn | None = None
    commutative: bool = False
    normalizes: AxesFn | None = None
    reduces: AxesFn | None = None
    #: synthesis draws it; False for piecewise-constant operators (floor, sign...), whose output
    #: in a small random program often stops depending on the inputs (after a mean, a loss)
    drawn: bool = True

    def __post_init__(self):
        if self.category not in CATEGORIES:
            raise ValueError(f"{self.name}: unknown category {self.category!r}")
        for slot in self.slots:
            if slot.domain not in DOMAINS:
                raise ValueError(f"{self.name}: unknown domain {slot.domain!r}")

    # -- structure ---------------------------------------------------------------------------
    @property
    def arity(self) -> int:
        return len(self.slots)

    @property
    def has_module(self) -> bool:
        return self.module is not None

    def rank_options(self, slot: int, known: Mapping[int, int]) -> tuple[int, ...]:
        """Ranks ``slot`` may have given the ranks already fixed for other slots."""
        if self.rank_rule is not None:
            return self.rank_rule(slot, known)
        options = self.slots[slot].ranks
        if self.same_rank and known:
            rank = next(iter(known.values()))
            options = tuple(r for r in options if r == rank)
        return options

    def sample_attrs(self, rng: random.Random, ranks: Sequence[int]) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        for spec in self.attrs:
            attrs.update(spec.sample(rng, ranks))
        return attrs

    # -- shapes --------------------------------------------------------------------------------
    def _check_arity(self, inputs: Sequence) -> None:
        if len(inputs) != self.arity:
            raise ShapeError(f"{self.name} takes {self.arity} tensor inputs, got {len(inputs)}")

    def output_shape(self, input_shapes: Sequence[Sequence[int]], attrs: Mapping[str, Any]) -> tuple[int, ...]:
        return tuple(self._concrete(input_shapes, attrs)[0])

    def flops(self, input_shapes: Sequence[Sequence[int]], attrs: Mapping[str, Any]) -> int:
        return int(self._concrete(input_shapes, attrs)[1])

    def _concrete(self, input_shapes, attrs):
        self._check_arity(input_shapes)
        dims = [[int(d) for d in shape] for shape in input_shapes]
        if any(d < 1 for shape in dims for d in shape):
            raise ShapeError("every dimension must be >= 1")
        return self.rule(ConcreteContext(attrs), dims, attrs)

    def output_rank(self, ranks: Sequence[int], attrs: Mapping[str, Any], *, guards: bool = False) -> int:
        """Output rank for these input ranks, raising ShapeError if the ranks are not accepted
        (``guards``: also if a generation guard fails on ranks alone)."""
        self._check_arity(ranks)
        out, _ = self.rule(RankContext(attrs, guards), RankContext.placeholders(ranks), attrs)
        return len(out)

    def constrain(self, model: Any, input_dims: Sequence[Sequence[Any]], attrs: Mapping[str, Any],
                  *, guards: bool = False, fixed: Mapping[str, Any] | None = None):
        """Add this operator's shape rule to a CP-SAT ``model``.

        Returns ``(output_dims, flops, params)``: output dimensions and the FLOP count as CP-SAT
        expressions, and the parameter variables by name. ``fixed`` pins parameters to values
        (else the solver chooses them)."""
        from drtriton.ops.cpsat import CpSatContext

        self._check_arity(input_dims)
        ctx = CpSatContext(model, guards=guards, fixed=fixed, name=self.name)
        out, flops = self.rule(ctx, [list(d) for d in input_dims], attrs)
        return out, flops, ctx.params

    # -- code ----------------------------------------------------------------------------------
    def torch_expr(self, inputs: Sequence[str], attrs: Mapping[str, Any], module_attr: str | None = None) -> str:
        self._check_arity(inputs)
        if self.has_module and not module_attr:
            raise ValueError(f"{self.name} is a module operator: pass module_attr")
        fields = dict(zip(INPUT_NAMES, inputs))
        if module_attr:
            fields["module"] = module_attr
        return _fill(self.torch_template, attrs, fields)

    def module_call(self, attrs: Mapping[str, Any], input_shapes: Sequence[Sequence[int]]) -> ModuleCall:
        if self.module is None:
            raise ValueError(f"{self.name} has no module form")
        return self.module(attrs, input_shapes)

    def module_expr(self, attrs: Mapping[str, Any], input_shapes: Sequence[Sequence[int]],
                    arg_names: Sequence[str] | None = None) -> str:
        """``nn.X(...)`` constructor source; ``arg_names`` replaces the size arguments by names."""
        return self.module_call(attrs, input_shapes).render(arg_names)

    def build_module(self, attrs: Mapping[str, Any], input_shapes: Sequence[Sequence[int]]):
        return eval(self.module_expr(attrs, input_shapes), _torch_namespace())  # noqa: S307

    def reference(self, inputs: Sequence[Any], attrs: Mapping[str, Any], module: Any = None):
        """Run the operator eagerly on tensors (builds the module from the shapes if needed)."""
        self._check_arity(inputs)
        ns = _torch_namespace()
        names = [f"_in{i}" for i in range(len(inputs))]
        ns.update(zip(names, inputs))
        module_attr = None
        if self.has_module:
            if module is None:
                module = self.build_module(attrs, [tuple(t.shape) for t in inputs])
            from types import SimpleNamespace

            ns["self"] = SimpleNamespace(mod=module)
            module_attr = "mod"
        return eval(self.torch_expr(names, attrs, module_attr), ns)  # noqa: S307

    def triton_expr(self, attrs: Mapping[str, Any] | None = None) -> str:
        """The Triton scalar expression with attributes filled in, ``{x}``/``{y}`` left open."""
        if self.triton_template is None:
            raise ValueError(f"{self.name} has no Triton scalar form (not elementwise)")
        return _fill(self.triton_template, attrs or {}, {})

    # -- values --------------------------------------------------------------------------------
    def output_range(self, input_ranges: Sequence[Range], attrs: Mapping[str, Any]) -> Range:
        if self.value_range is not None:
            return self.value_range(input_ranges, attrs)
        if self.triton_template is not None:
            from drtriton.ops.ranges import image

            return image(self.triton_expr(attrs), input_ranges)
        return UNBOUNDED


def _torch_namespace() -> dict[str, Any]:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    return {"torch": torch, "nn": nn, "F": F}
