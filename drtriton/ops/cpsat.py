"""CP-SAT back end for shape rules (see ``drtriton.ops.shape``).

OR-Tools is an optional dependency (``pip install drtriton[synth]``): this module imports it when
a context is created, never when ``drtriton.ops`` is imported.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from drtriton.ops.shape import Dim, ShapeError

#: Upper bound on any product variable when the caller gives none.
DEFAULT_CAP = 1 << 40


def _cp_model():
    try:
        from ortools.sat.python import cp_model
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("CP-SAT shape rules need OR-Tools: pip install 'drtriton[synth]'") from exc
    return cp_model


class CpSatContext:
    """Shape-rule back end whose dimensions are CP-SAT integer variables.

    - ``cap`` bounds every product variable (numels and FLOP terms are bounded anyway, and a
      finite domain keeps the solver's products cheap).
    - ``guards``: enforce ``ctx.guard`` conditions (the generator does; agreement tests do not).
    - ``decide(var, lo, hi, dist)``: called for every parameter variable so the generator can
      register it as a randomised decision; absent, parameters are left to the solver.
    - ``fixed``: parameter values to pin (tests compare against the concrete rule this way).
    - ``enforce``: a literal that enforces every ``require``/``guard`` constraint (assumption-based
      diagnosis of infeasible models names the operator this way).
    """

    def __init__(self, model: Any, *, cap: int = DEFAULT_CAP, guards: bool = False,
                 decide: Callable[[Any, int, int, str], None] | None = None,
                 fixed: Mapping[str, Any] | None = None, enforce: Any = None,
                 name: str = "op", max_dim: int | None = None):
        self.cp_model = _cp_model()
        self.model = model
        self.cap = cap
        self.guards = guards
        self.decide = decide
        self.fixed = fixed
        self.enforce = enforce
        self.name = name
        #: what ``gen=(lo, None)`` means: the generator's cap on a single dimension
        self.max_dim = cap if max_dim is None else max_dim
        #: parameter name -> variable, or list of variables for per-dimension parameters
        self.params: dict[str, Any] = {}
        self._products: dict[tuple, Any] = {}
        self._as_var: dict[int, tuple[Any, Any]] = {}

    # -- helpers -----------------------------------------------------------------------------
    def is_var(self, value: Any) -> bool:
        return isinstance(value, self.cp_model.IntVar)

    def as_var(self, value: Dim, lo: int = 0, hi: int | None = None) -> Dim:
        """An int stays an int; an expression becomes a variable (memoised per expression)."""
        if isinstance(value, int) or self.is_var(value):
            return value
        hit = self._as_var.get(id(value))
        if hit is not None:
            return hit[1]
        var = self.model.new_int_var(lo, self.cap if hi is None else hi, "")
        self.model.add(var == value)
        self._as_var[id(value)] = (value, var)  # keep `value` alive so its id stays unique
        return var

    def _add(self, cond: Any, reason: str) -> None:
        if isinstance(cond, bool):
            if not cond:
                raise ShapeError(reason)
            return
        constraint = self.model.add(cond)
        if self.enforce is not None:
            constraint.only_enforce_if(self.enforce)

    # -- the ShapeContext interface -------------------------------------------------------------
    def param(self, name, *, lo=0, hi=None, index=None, gen=None, dist="log"):
        top = self.cap if hi is None else hi
        if self.fixed is not None:
            value = self.fixed[name]
            if index is not None and isinstance(value, (tuple, list)):
                value = value[index]
            var = self.model.new_int_var(lo, top, f"{self.name}.{name}")
            self.model.add(var == int(value))
        else:
            glo, ghi = lo, top
            if gen is not None:
                glo = max(lo, gen[0])
                ghi = min(top, self.max_dim if gen[1] is None else gen[1])
            if glo > ghi:
                raise ShapeError(f"{name}: no admissible value in [{glo}, {ghi}]")
            var = self.model.new_int_var(glo, ghi, f"{self.name}.{name}")
            if self.decide is not None:
                self.decide(var, glo, ghi, dist)
        if index is None:
            self.params[name] = var
        else:
            self.params.setdefault(name, []).append(var)
        return var

    def require(self, cond, reason):
        self._add(cond, reason)

    def guard(self, cond, reason):
        if self.guards:
            self._add(cond, reason)

    def mul(self, *factors):
        const = 1
        terms = []
        for f in factors:
            if isinstance(f, int):
                const *= f
            else:
                terms.append(self.as_var(f))
        if not terms or const == 0:
            return const
        if len(terms) == 1:
            return const * terms[0] if const != 1 else terms[0]
        # A chain of binary products, each bounded by cap: CP-SAT rejects an n-ary product whose
        # factor bounds multiply past int64, and shared prefixes (numels) are reused.
        terms.sort(key=lambda t: t.index)
        acc = terms[0]
        for i, term in enumerate(terms[1:], start=2):
            key = tuple(t.index for t in terms[:i])
            var = self._products.get(key)
            if var is None:
                var = self.model.new_int_var(0, self.cap, "")
                self.model.add_multiplication_equality(var, [acc, term])
                self._products[key] = var
            acc = var
        return acc if const == 1 else const * acc

    def floordiv(self, expr, divisor):
        if divisor == 1:
            return expr
        if isinstance(expr, int):
            return expr // divisor
        q = self.model.new_int_var(-self.cap, self.cap, "")
        self.model.add(divisor * q <= expr)
        self.model.add(expr <= divisor * q + (divisor - 1))
        return q

    def quotient(self, value, divisor, reason):
        if isinstance(value, int) and isinstance(divisor, int):
            if divisor <= 0 or value % divisor:
                raise ShapeError(f"{reason} (got {value} and {divisor})")
            return value // divisor
        q = self.model.new_int_var(1, self.cap, "")
        self._add(value == self.mul(divisor, q), reason)
        return q

    def broadcast(self, a, b):
        if a is b or (isinstance(b, int) and b == 1):
            return a
        if isinstance(a, int) and a == 1:
            return b
        if isinstance(a, int) and isinstance(b, int):
            if a != b:
                raise ShapeError(f"shapes do not broadcast: {a} vs {b}")
            return a
        a, b = self.as_var(a), self.as_var(b)
        out = self.model.new_int_var(1, self.cap, "")
        self.model.add_max_equality(out, [a, b])
        for side in (a, b):
            keeps = self.model.new_bool_var("")  # side == out, else side is broadcast (== 1)
            self.model.add(side == out).only_enforce_if(keeps)
            self.model.add(side == 1).only_enforce_if(~keeps)
        return out
