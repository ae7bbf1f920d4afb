"""Small dense linear algebra: LU with partial pivoting (lu_factor, lu, lu_unpack, lu_solve, det,
slogdet, inv, solve), Cholesky (cholesky, cholesky_solve, cholesky_inverse), triangular
solves (solve_triangular, triangular_solve), QR (Householder), and Jacobi rotations: symmetric
eigenvalues (eigh) and singular values (svd).

One Triton template serves them all (`drtriton.policy.emit.factorization`): a program owns one
matrix of the batch in registers and runs the factorization as a loop over pivots. Capture maps
the aten operators (`linalg_lu_factor_ex`, `_linalg_det`, `linalg_cholesky_ex`...) here; each
record's PyTorch form is the function's non-raising spelling (`*_ex`: a matrix that is not
invertible or not positive-definite gives an `info`, not an error), so the shape rules hold on
any values. lu_unpack and lu_solve take pivots that only an LU factorization makes: their
records' forms factor `x` first (`torch.linalg.lu_factor(x)`), so their slots are matrices.
Eigenvectors and singular vectors are unique only up to sign, so the forms shown for eigh and svd
use what does not depend on it: eigvalsh, and pinv (V S^+ U^T).

FLOPs: n^3 per matrix (a factorization is about 2n^3/3, a solve 2n^2 per right-hand side; a
stand-in, as the rules are linear). Not drawn by synthesis: ill-conditioned draws would make
programs whose values a float32 verifier cannot judge.
"""

from __future__ import annotations

from drtriton.ops.operator import Choice, Operator, Slot
from drtriton.ops.shape import ShapeError, broadcast_shapes

_MATRIX = (2, 3)
_UPPER = Choice("upper", (False, True))
_LEFT = Choice("left", (True, False))


def _square(ctx, a, what: str):
    if len(a) < 2:
        raise ShapeError(f"{what}: A must be a matrix or a batch of matrices")
    ctx.require(a[-1] == a[-2], f"{what}: A must be batches of square matrices")


def _cost(ctx, a):
    return ctx.mul(*a, a[-1])


def _same_rule(ctx, dims, attrs):
    """A square matrix to one of its shape: inv, cholesky, cholesky_inverse (tensorinv with `ind`)."""
    (a,) = dims
    ind = attrs.get("ind")
    if ind is not None:  # tensorinv: A viewed as (prod(shape[:ind]), prod(shape[ind:]))
        if not 0 < ind <= len(a):
            raise ShapeError("tensorinv: ind must be a positive axis count")
        ctx.require(ctx.mul(*a[:ind]) == ctx.mul(*a[ind:]), "tensorinv: the two halves' products differ")
        return list(a[ind:]) + list(a[:ind]), ctx.mul(*a, *a[ind:])
    _square(ctx, a, "linalg")
    return list(a), _cost(ctx, a)


def _factor_rule(ctx, dims, attrs):
    """lu_factor: LU of any (*, m, n) matrix, of its shape (pivots and info its other outputs)."""
    (a,) = dims
    if len(a) < 2:
        raise ShapeError("lu_factor: A must be a matrix or a batch of matrices")
    return list(a), _cost(ctx, a)


def _lu_rule(ctx, dims, attrs):
    """lu / lu_unpack: P (*, m, m) first (L, U second and third)."""
    (a,) = dims
    if len(a) < 2:
        raise ShapeError("lu: A must be a matrix or a batch of matrices")
    return list(a[:-2]) + [a[-2], a[-2]], _cost(ctx, a)


def _det_rule(ctx, dims, attrs):
    (a,) = dims
    _square(ctx, a, "det")
    return list(a[:-2]), _cost(ctx, a)


def _solve_ranks(slot, known):
    """B's ranks given A's: PyTorch reads a B of A's rank minus one as a vector when its shape is
    A's without the last axis, a comparison of sizes no CP-SAT rule can branch on; those ranks
    are left out (a vector B of rank 1 stays)."""
    if slot == 0:
        return _MATRIX
    return (1, known[0]) if 0 in known else (1, 2, 3)


def _solve_rule(ctx, dims, attrs):
    """A X = B (left) or X A = B; B a vector (rank 1) or a batch of matrices."""
    a, b = dims
    _square(ctx, a, "solve")
    left = attrs.get("left", True)
    if len(b) == 1:
        if not left:
            raise ShapeError("solve: a vector B only with left=True")
        ctx.require(b[0] == a[-1], "solve: incompatible shapes")
        return list(a[:-1]), _cost(ctx, a)
    if len(b) == len(a) - 1:
        raise ShapeError("solve: B of A's rank minus one is not modelled (a vector when its shape is A's batch)")
    ctx.require((b[-2] if left else b[-1]) == a[-1], "solve: incompatible shapes")
    out = broadcast_shapes(ctx, a[:-2], b[:-2]) + list(b[-2:])
    return out, _cost(ctx, a) + ctx.mul(*out, a[-1])


def _rhs_rule(what: str, a_slot: int, left_attr: str | None = None):
    """A (*, n, n) and a matrix right-hand side B (*, n, k) (or (*, k, n) when not left)."""
    def rule(ctx, dims, attrs):
        a, b = dims[a_slot], dims[1 - a_slot]
        _square(ctx, a, what)
        if len(b) < 2:
            raise ShapeError(f"{what}: B must be a matrix or a batch of matrices")
        left = attrs.get(left_attr, True) if left_attr else True
        ctx.require((b[-2] if left else b[-1]) == a[-1], f"{what}: incompatible shapes")
        out = broadcast_shapes(ctx, a[:-2], b[:-2]) + list(b[-2:])
        return out, _cost(ctx, a) + ctx.mul(*out, a[-1])
    return rule


def _eigh_rule(ctx, dims, attrs):
    """eigvalsh: the n eigenvalues of each symmetric (*, n, n) matrix."""
    (a,) = dims
    _square(ctx, a, "eigh")
    return list(a[:-1]), _cost(ctx, a)


def _pinv_rule(ctx, dims, attrs):
    """pinv (the form shown for svd): (*, m, n) to (*, n, m)."""
    (a,) = dims
    if len(a) < 2:
        raise ShapeError("svd: A must be a matrix or a batch of matrices")
    return list(a[:-2]) + [a[-1], a[-2]], ctx.mul(*a, a[-1])


def _eigh_template(attrs) -> str:
    return "torch.linalg.eigvalsh({x}, UPLO='U')" if attrs.get("upper") else "torch.linalg.eigvalsh({x})"


def _inv_template(attrs) -> str:
    if attrs.get("ind") is not None:
        return "torch.linalg.tensorinv({x}, ind={ind})"
    return "torch.linalg.inv_ex({x})[0]"


def _op(name, rule, template, description, attrs=(), fns=(), methods=(), slots=("A",), rank_rule=None):
    names = slots
    return Operator(name=name, category="factorization", description=description,
                    slots=tuple(Slot(n, _MATRIX if rank_rule is None else (1, 2, 3)) for n in names), rule=rule,
                    torch_template=template, attrs=attrs, torch_functions=fns, tensor_methods=methods,
                    rank_rule=rank_rule, drawn=False)


OPERATORS = (
    _op("lu_factor", _factor_rule, "torch.linalg.lu_factor_ex({x})[0]",
        "LU with partial pivoting (LAPACK getrf): LU packed, then 1-based int32 pivots and info",
        fns=("torch.linalg.lu_factor", "torch.linalg.lu_factor_ex")),
    _op("lu", _lu_rule, "torch.linalg.lu({x})[0]", "the LU factorization unpacked: P, L, U with A = P L U",
        fns=("torch.linalg.lu",)),
    _op("lu_unpack", _lu_rule, "torch.lu_unpack(*torch.linalg.lu_factor({x}))[0]",
        "P, L, U from a packed LU and its pivots (the form shown factors x first)", fns=("torch.lu_unpack",)),
    _op("lu_solve", _rhs_rule("lu_solve", 0, "left"),
        "torch.linalg.lu_solve(*torch.linalg.lu_factor({x}), {y}, left={left}, adjoint={adjoint})",
        "A X = B from A's LU and pivots (left=False: X A = B; adjoint: A^T) (the form shown factors x first)",
        (_LEFT, Choice("adjoint", (False, True))), ("torch.linalg.lu_solve",), slots=("A", "B")),
    _op("det", _det_rule, "torch.linalg.det({x})", "the determinant: U's diagonal product, signed by the pivots",
        fns=("torch.linalg.det", "torch.det"), methods=("det",)),
    _op("slogdet", _det_rule, "torch.linalg.slogdet({x})[1]",
        "the sign and the log of the absolute determinant (logabsdet second; logdet from both)",
        fns=("torch.linalg.slogdet", "torch.slogdet", "torch.logdet"), methods=("slogdet", "logdet")),
    _op("inv", _same_rule, _inv_template, "the inverse (A X = I by LU), info second; tensorinv with ind",
        fns=("torch.linalg.inv", "torch.linalg.inv_ex", "torch.inverse", "torch.linalg.tensorinv"),
        methods=("inverse",)),
    _op("solve", _solve_rule, "torch.linalg.solve_ex({x}, {y}, left={left})[0]",
        "A X = B by LU (left=False: X A = B); B a vector or matrices, batches broadcast",
        (_LEFT,), ("torch.linalg.solve", "torch.linalg.solve_ex"), slots=("A", "B"), rank_rule=_solve_ranks),
    _op("cholesky", _same_rule, "torch.linalg.cholesky_ex({x}, upper={upper})[0]",
        "Cholesky factor L (or U = L^T) of a positive-definite matrix, info second",
        (_UPPER,), ("torch.linalg.cholesky", "torch.linalg.cholesky_ex", "torch.cholesky"), ("cholesky",)),
    _op("cholesky_solve", _rhs_rule("cholesky_solve", 1), "torch.cholesky_solve({x}, {y}, upper={upper})",
        "X with L L^T X = B, from B and the Cholesky factor L (or U)", (_UPPER,), ("torch.cholesky_solve",),
        ("cholesky_solve",), slots=("B", "L")),
    _op("cholesky_inverse", _same_rule, "torch.cholesky_inverse({x}, upper={upper})",
        "(L L^T)^-1 from the Cholesky factor L (or U)", (_UPPER,), ("torch.cholesky_inverse",),
        ("cholesky_inverse",)),
    _op("solve_triangular", _rhs_rule("solve_triangular", 0, "left"),
        "torch.linalg.solve_triangular({x}, {y}, upper={upper}, left={left}, unitriangular={unitriangular})",
        "T X = B (or X T = B) for a triangular T by substitution",
        (_UPPER, _LEFT, Choice("unitriangular", (False, True))), ("torch.linalg.solve_triangular",), slots=("A", "B")),
    _op("triangular_solve", _rhs_rule("triangular_solve", 1),
        "torch.triangular_solve({x}, {y}, upper={upper}, transpose={transpose}, unitriangular={unitriangular})[0]",
        "the solution of A X = B (or A^T X = B) for a triangular A, and a copy of A",
        (Choice("upper", (True, False)), Choice("transpose", (False, True)), Choice("unitriangular", (False, True))),
        ("torch.triangular_solve",), ("triangular_solve",), slots=("B", "A")),
    _op("qr", _factor_rule, "torch.linalg.qr({x}, mode={mode})[1]",
        "Q and R by Householder reflections as LAPACK's geqrf and orgqr (mode reduced, complete or r; the form "
        "shown returns R, of A's shape in complete mode)",
        (Choice("mode", ("complete",)),), ("torch.linalg.qr", "torch.qr"), ("qr",)),
    _op("eigh", _eigh_rule, _eigh_template,
        "eigenvalues (ascending) and eigenvectors of a symmetric matrix (its lower triangle, or upper) "
        "by Jacobi rotations",
        (Choice("upper", (False, True)),), ("torch.linalg.eigh", "torch.linalg.eigvalsh")),
    _op("svd", _pinv_rule, "torch.linalg.pinv({x})",
        "singular values (descending) and vectors by one-sided Jacobi, and what stands on them: pinv, "
        "matrix_rank, cond, the nuclear norm (the form shown is pinv)",
        fns=("torch.linalg.svd", "torch.linalg.svdvals", "torch.svd", "torch.linalg.pinv", "torch.pinverse"),
        methods=("svd", "pinverse")),
)
