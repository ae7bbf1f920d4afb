"""Sizes: one CP-SAT model per program, solved with a randomised, seeded search.

Every tensor dimension is an integer variable. The model holds every operator's shape rule
(``Operator.rule`` on a ``CpSatContext``, guards on), the layout glue, the global bounds
(``min_flops <= sum of operator FLOPs <= max_flops``, every tensor at most ``max_numel``
elements, every free size at most ``max_dim``) and a FLOP window drawn per attempt.

A random feasible solution comes from the search itself: each free integer (input axes,
out_channels, paddings, ...) gets a random target (log-uniform for sizes), the variables are
decided in a random order, each as close to its target as the constraints allow (random side on
ties). Presolve is off (it would rewrite the variables and drop that strategy, and costs more
than the search on models this small); the search is single-threaded with a deterministic time
limit, so a seed gives the same programs on every machine.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from drtriton.ops.cpsat import CpSatContext, _cp_model
from drtriton.ops.shape import ShapeError
from drtriton.training.synth.config import Bounds
from drtriton.training.synth.sizes import target
from drtriton.training.synth.structure import Graph

#: CP-SAT deterministic-time budget of one solve (about a second of work on a slow core).
DETERMINISTIC_LIMIT = 1.0


@dataclass
class Solution:
    shapes: list[tuple[int, ...]]  # per tensor id
    attrs: list[dict[str, Any]]  # per op: sampled attributes plus solved parameters
    flops: list[int]  # per op
    adapted: list[list[tuple[int, ...]]]  # per op: input shapes after layout glue

    @property
    def total_flops(self) -> int:
        return sum(self.flops)


class _Model:
    """Builds the CP-SAT model of a graph (also used, with assumptions, to explain failures)."""

    def __init__(self, graph: Graph, bounds: Bounds, rng: random.Random | None, window: tuple[int, int],
                 explain: bool = False, targets: list[tuple[int, str]] | None = None):
        cp_model = _cp_model()
        self.cp_model, self.graph, self.bounds, self.rng = cp_model, graph, bounds, rng
        self.model = cp_model.CpModel()
        self.decisions: list[tuple[Any, int, str]] = []  # (variable, target, distribution)
        self.scale = None if targets is None else list(targets)
        # explain mode: global bounds and each operator's rule are enforced by named literals
        self.literals: dict[str, Any] = {}
        self.explain = explain
        size_cap = bounds.max_numel if not explain else max(bounds.max_numel, 1 << 31)
        self.ctx = CpSatContext(self.model, cap=max(bounds.max_flops, size_cap, window[1]), guards=True,
                                decide=self._decide if rng is not None else None, max_dim=bounds.max_dim)
        self.dims: dict[int, list] = {}
        self.adapted: dict[tuple[int, int], list] = {}
        self.params: list[dict[str, Any]] = []
        self.op_flops: list[Any] = []
        self.window = window
        self._build(window)

    def _literal(self, name: str):
        if not self.explain:
            return None
        if name not in self.literals:
            self.literals[name] = self.model.new_bool_var(name)
        return self.literals[name]

    def _bounded(self, constraint, name: str) -> None:
        lit = self._literal(name)
        if lit is not None:
            constraint.only_enforce_if(lit)

    def _decide(self, var, lo: int, hi: int, dist: str) -> None:
        if self.scale is not None:  # second pass: the first pass's targets, rescaled
            goal, dist = self.scale.pop(0)
        else:
            goal = target(self.rng, lo, hi, dist)
        self.decisions.append((var, min(hi, max(lo, goal)), dist))

    def _free_dims(self, count: int) -> list:
        top = self.bounds.max_dim if not self.explain else self.ctx.cap
        dims = [self.model.new_int_var(1, top, "") for _ in range(count)]
        for var in dims:
            if self.explain:
                self._bounded(self.model.add(var <= self.bounds.max_dim), "max_dim")
            elif self.rng is not None:
                self._decide(var, 1, top, "log")
        return dims

    def _limit_numel(self, dims: list) -> None:
        numel = self.ctx.mul(*dims)
        if not isinstance(numel, int):
            self._bounded(self.model.add(numel <= self.bounds.max_numel), "max_numel")
        elif numel > self.bounds.max_numel:
            raise ShapeError(f"a tensor of {numel} elements exceeds max_numel")

    def slot_dims(self, op_index: int, slot: int) -> list:
        key = (op_index, slot)
        if key not in self.adapted:
            use = self.graph.ops[op_index].uses[slot]
            dims = list(self.dims[use.tensor])
            if use.flatten is not None:
                dims = dims[: use.flatten] + [self.ctx.mul(*dims[use.flatten:])]
            self.adapted[key] = [1] * use.unsqueeze + dims
        return self.adapted[key]

    def _build(self, window: tuple[int, int]) -> None:
        graph, ctx, model = self.graph, self.ctx, self.model
        for tensor in graph.tensors:
            if tensor.producer is None:
                free = iter(self._free_dims(tensor.dims.count("free")))
                dims = []
                for spec in tensor.dims:
                    if spec == "free":
                        dims.append(next(free))
                    elif spec == "one":
                        dims.append(1)
                    else:
                        slot, axis = spec
                        dims.append(self.slot_dims(tensor.consumer, slot)[axis])
            else:
                node = graph.ops[tensor.producer]
                inputs = [self.slot_dims(node.index, s) for s in range(len(node.uses))]
                ctx.params, ctx.name = {}, f"{node.name}_{node.index}"
                ctx.enforce = self._literal(f"{node.name} (operator {node.index}) shape rule")
                out, flops = node.op.rule(ctx, inputs, node.attrs)
                ctx.enforce = None
                dims = [ctx.as_var(d, 1, ctx.cap) for d in out]
                for d in dims:
                    if not isinstance(d, int):
                        model.add(d >= 1)
                flops_var = model.new_int_var(0, ctx.cap, f"flops_{node.index}")
                model.add(flops_var == flops)
                self.params.append(ctx.params)
                self.op_flops.append(flops_var)
            self.dims[tensor.id] = dims
            self._limit_numel(dims)
        total = sum(self.op_flops)
        self._bounded(model.add(total >= max(window[0], self.bounds.min_flops)), "min_flops")
        self._bounded(model.add(total <= min(window[1], self.bounds.max_flops)), "max_flops")

    def add_search(self) -> None:
        order = list(self.decisions)
        self.rng.shuffle(order)
        for var, goal, _ in order:
            distance = self.model.new_int_var(0, self.ctx.cap, "")
            self.model.add_abs_equality(distance, var - goal)
            self.model.add_decision_strategy([distance], self.cp_model.CHOOSE_FIRST, self.cp_model.SELECT_MIN_VALUE)
            self.model.add_decision_strategy([var], self.cp_model.CHOOSE_FIRST, self.cp_model.SELECT_RANDOM_HALF)

    def extract(self, solver) -> Solution:
        value = lambda d: d if isinstance(d, int) else int(solver.value(d))  # noqa: E731
        shapes = [tuple(value(d) for d in self.dims[t.id]) for t in self.graph.tensors]
        attrs = []
        for node, params in zip(self.graph.ops, self.params):
            solved = {k: tuple(value(v) for v in p) if isinstance(p, list) else value(p) for k, p in params.items()}
            attrs.append({**node.attrs, **solved})
        adapted = [[tuple(value(d) for d in self.slot_dims(n.index, s)) for s in range(len(n.uses))]
                   for n in self.graph.ops]
        return Solution(shapes, attrs, [value(f) for f in self.op_flops], adapted)


def flops_window(rng: random.Random, bounds: Bounds) -> tuple[int, int]:
    """A random FLOP band (a factor 16 wide, log-uniform centre) so sizes spread over the range
    instead of piling up at max_flops."""
    lo, hi = max(bounds.min_flops, 1), bounds.max_flops
    centre = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    return max(lo, int(centre / 4)), min(hi, int(centre * 4) + 1)


#: Second pass when the first pass's sizes sit this far (geometric mean ratio) from their targets.
RESCALE_THRESHOLD = 1.5


def solve(graph: Graph, bounds: Bounds, rng: random.Random, window: tuple[int, int] | None = None) -> Solution | None:
    """A random solution of the graph's sizes, or None when the model is infeasible (or the
    search ran out of budget).

    Two passes. Targets drawn independently often overshoot (or undershoot) the FLOP window
    together, and the variables decided last absorb all of it (squeezed to 1 or pushed to
    max_dim). When the first solution's sizes are far from their targets on average, the
    second pass rescales every size target by that geometric mean, spreading the correction."""
    window = window or (bounds.min_flops, bounds.max_flops)
    try:
        built = _Model(graph, bounds, rng, window)
    except ShapeError:  # a rule failed on constants alone
        return None
    solver, solution = _run(built, rng)
    if solution is None:
        return None
    logs = [math.log(solver.value(var) / goal) for var, goal, dist in built.decisions if dist == "log"]
    shift = sum(logs) / len(logs) if logs else 0.0
    if abs(shift) > math.log(RESCALE_THRESHOLD):
        factor = math.exp(shift)
        targets = [(max(1, round(goal * factor)) if dist == "log" else goal, dist)
                   for _, goal, dist in built.decisions]
        second = _run(_Model(graph, bounds, rng, window, targets=targets), rng)[1]
        solution = second or solution
    _check(graph, solution)
    return solution


def _run(built: _Model, rng: random.Random):
    built.add_search()
    cp_model = built.cp_model
    solver = cp_model.CpSolver()
    params = solver.parameters
    params.num_workers = 1
    params.search_branching = cp_model.FIXED_SEARCH
    params.cp_model_presolve = False
    params.random_seed = rng.randrange(1 << 30)
    params.max_deterministic_time = DETERMINISTIC_LIMIT
    params.max_time_in_seconds = 30.0  # a safety net only: the deterministic limit decides
    status = solver.solve(built.model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return solver, None
    return solver, built.extract(solver)


def _check(graph: Graph, solution: Solution) -> None:
    """The solved sizes must satisfy every operator's concrete rule (CP-SAT and concrete rules
    are one function; this catches back-end bugs)."""
    for node, attrs, inputs, flops in zip(graph.ops, solution.attrs, solution.adapted, solution.flops):
        shape = node.op.output_shape(inputs, attrs)
        if shape != solution.shapes[node.output] or node.op.flops(inputs, attrs) != flops:
            raise AssertionError(f"solver and rule disagree on {node.name}: {inputs} {attrs}")


def explain(graph: Graph, bounds: Bounds) -> list[str]:
    """Which constraints make the graph infeasible: a sufficient subset of the global bounds
    (min_flops, max_flops, max_numel, max_dim) and operators' shape rules."""
    try:
        built = _Model(graph, bounds, None, (bounds.min_flops, bounds.max_flops), explain=True)
    except ShapeError as exc:
        return [f"shape rule: {exc}"]
    cp_model = built.cp_model
    built.model.add_assumptions(list(built.literals.values()))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 20.0
    status = solver.solve(built.model)
    if status == cp_model.INFEASIBLE:
        names = {lit.index: name for name, lit in built.literals.items()}
        return sorted(names[i] for i in solver.sufficient_assumptions_for_infeasibility())
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return []
    return ["unknown (the solver ran out of time)"]
