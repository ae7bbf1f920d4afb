"""Small dense linear algebra (drtriton/policy/emit/factorization.py), end to end on the CPU:
capture -> BuiltinPolicy candidates (strict mode unless said) -> the first candidate verified by
the Verifier under the Triton interpreter, against PyTorch's LAPACK, at the inputs' batch and the
verifier's second one. Batched cases, rectangular LU, and matrices whose first pivot is 0 (LU
must swap rows, as getrf does)."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from test_scatter import capture, check, source  # noqa: E402

from drtriton import ops  # noqa: E402
from drtriton.policy.builtin import BuiltinPolicy  # noqa: E402
from drtriton.policy.emit import Names, Unsupported, factorization  # noqa: E402
from drtriton.policy.program import Program  # noqa: E402

A = "torch.randn(3, 4, 4)"
#: well-conditioned (what solves, inverses and log-determinants are judged on at float32's
#: tolerances) yet pivoting at every step: a diagonally dominant matrix with its rows rotated
WELL = "(torch.randn(3, 4, 4) * 0.5 + 4 * torch.eye(4)).roll(1, -2)"
#: the same with each matrix's (0, 0) entry exactly 0: getrf's first pivot must come from below
ZERO_FIRST = f"{WELL} * (1 - torch.eye(4)[:1].mT @ torch.eye(4)[:1])"
SPD = "x @ x.transpose(-2, -1) + torch.eye(x.shape[-1])"  # positive-definite


@pytest.mark.parametrize("expr,inputs,label", [
    ("torch.linalg.lu_factor_ex(x)", A, "lu_factor"),  # LU, pivots, info
    ("torch.linalg.lu_factor(x)", "torch.randn(2, 3, 5)", "lu_factor"),  # wide
    ("torch.linalg.lu(x)", "torch.randn(2, 5, 3)", "lu"),  # tall: P, L, U
    ("torch.lu_unpack(*torch.linalg.lu_factor(x))", "torch.randn(3, 5)", "lu_unpack"),
    ("torch.linalg.det(x)", A, "det"),
    ("torch.linalg.slogdet(x)", WELL, "slogdet"),
    ("torch.logdet(x @ x.transpose(-2, -1) + torch.eye(4))", A, "slogdet"),
    ("torch.linalg.inv_ex(x)", WELL, "inv"),
])
def test_lu_family(cpu_verifier, expr, inputs, label):
    check(cpu_verifier, source(expr, inputs, "x"), [label])


def test_tensorinv(cpu_verifier):
    """A (2, 3, 6) tensor inverted as a 6 x 6 matrix (no other batch size: 1 x 3 is not 6). Well
    conditioned and pivoting: a plain randn matrix is now and then near-singular, and its inverse
    then differs from LAPACK's by more than the tolerance (different summation order)."""
    well = "(torch.randn(6, 6) * 0.5 + 4 * torch.eye(6)).roll(1, -2).reshape(2, 3, 6)"
    check(cpu_verifier, source("torch.linalg.tensorinv(x, ind=2)", well, "x"), ["inv"], second=False)


@pytest.mark.parametrize("expr,inputs", [
    ("torch.linalg.solve(a, b)", f"{WELL}, torch.randn(3, 4, 2)"),
    ("torch.linalg.solve(a, b)", f"{WELL}, torch.randn(4)"),  # a vector B
    ("torch.linalg.solve_ex(a, b, left=False)", f"{WELL}, torch.randn(2, 4)"),  # X A = B, broadcast
    ("torch.linalg.solve(a.transpose(-2, -1), b)", f"{WELL}, torch.randn(3, 4, 2)"),  # A not contiguous
    ("torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b)", f"{WELL}, torch.randn(3, 4, 2)"),
    ("torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b, adjoint=True)",
     f"{WELL}, torch.randn(3, 4, 2)"),
    ("torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b, left=False)",
     f"{WELL}, torch.randn(3, 2, 4)"),
])
def test_solves_through_lu(cpu_verifier, expr, inputs):
    check(cpu_verifier, source(expr, inputs, "a, b"), [expr.split("(")[0].split(".")[-1].replace("_ex", "")])


def test_a_zero_first_pivot_swaps_rows(cpu_verifier):
    """Each matrix's (0, 0) entry is 0: getrf must pick another row (pivots[0] != 1); LU, pivots,
    det's sign and the solve all depend on the swap."""
    problem, graph, ns = capture(source("torch.linalg.lu_factor(x)", ZERO_FIRST, "x"))
    x = ns["get_inputs"]()[0]
    assert (x[:, 0, 0] == 0).all() and (torch.linalg.lu_factor(x)[1][:, 0] != 1).all()
    check(cpu_verifier, source("torch.linalg.lu_factor_ex(x)", ZERO_FIRST, "x"), ["lu_factor"])
    check(cpu_verifier, source("torch.linalg.det(x)", ZERO_FIRST, "x"), ["det"])
    check(cpu_verifier, source("torch.linalg.solve(x, x[..., :2] + 1)", ZERO_FIRST, "x"), ["solve"])
    check(cpu_verifier, source("torch.linalg.lu(x)", ZERO_FIRST, "x"), ["lu"])


def test_singular_matrices_report_info(cpu_verifier):
    """A zero column: getrf's info is its index (1-based) and det is 0; the factorization goes on."""
    x = "torch.randn(3, 4, 4) * torch.tensor([1.0, 1.0, 0.0, 1.0])"
    check(cpu_verifier, source("torch.linalg.lu_factor_ex(x)", x, "x"), ["lu_factor"])
    check(cpu_verifier, source("torch.linalg.det(x)", x, "x"), ["det"])


@pytest.mark.parametrize("expr,label", [
    (f"torch.linalg.cholesky_ex({SPD})", "cholesky"),
    (f"torch.linalg.cholesky({SPD}, upper=True)", "cholesky"),
    (f"torch.cholesky_solve(x[..., :2], torch.linalg.cholesky({SPD}))", "cholesky_solve"),
    (f"torch.cholesky_solve(x[..., :2], torch.linalg.cholesky({SPD}, upper=True), upper=True)", "cholesky_solve"),
    (f"torch.cholesky_inverse(torch.linalg.cholesky({SPD}))", "cholesky_inverse"),
    (f"torch.cholesky_inverse(torch.linalg.cholesky({SPD}, upper=True), upper=True)", "cholesky_inverse"),
])
def test_cholesky_family(cpu_verifier, expr, label):
    check(cpu_verifier, source(expr, A, "x"), [label])


def test_cholesky_of_a_matrix_that_is_not_positive_definite(cpu_verifier):
    """info is the first pivot that is not positive (1-based), and L what LAPACK's potf2 leaves:
    the columns before it factored, the updated pivot, A's own values after it. Random matrices
    fail at any pivot (or none); the negated SPD matrix at the first; a large negative last
    diagonal entry at the last."""
    check(cpu_verifier, source("torch.linalg.cholesky_ex(x)", "torch.randn(8, 5, 5)", "x"), ["cholesky"])
    check(cpu_verifier, source(f"torch.linalg.cholesky_ex(-({SPD}))", A, "x"), ["cholesky"])
    last = "(lambda s: s - 50 * torch.eye(4)[3].diag())((lambda x: x @ x.mT + torch.eye(4))(torch.randn(3, 4, 4)))"
    check(cpu_verifier, source("torch.linalg.cholesky_ex(x)", last, "x"), ["cholesky"], second=False)


@pytest.mark.parametrize("expr,inputs", [
    ("torch.linalg.solve_triangular(a, b, upper=True)",
     "torch.randn(3, 4, 4) + 4 * torch.eye(4), torch.randn(3, 4, 2)"),
    ("torch.linalg.solve_triangular(a, b, upper=False, unitriangular=True)",
     "torch.randn(3, 4, 4) * 0.5, torch.randn(4, 3)"),
    ("torch.linalg.solve_triangular(a, b, upper=True, left=False)",
     "torch.randn(3, 4, 4) + 4 * torch.eye(4), torch.randn(3, 2, 4)"),
    # B first: the verifier's other batch size changes B's batch, and A (4, 4) broadcasts (its copy too)
    ("torch.triangular_solve(b, a)", "torch.randn(3, 4, 2), torch.randn(4, 4) + 4 * torch.eye(4)"),
    ("torch.triangular_solve(b, a, upper=False, transpose=True)",
     "torch.randn(3, 4, 2), torch.randn(3, 4, 4) + 4 * torch.eye(4)"),
])
def test_triangular_solves(cpu_verifier, expr, inputs):
    args = "b, a" if expr.startswith("torch.triangular_solve") else "a, b"
    check(cpu_verifier, source(expr, inputs, args), [expr.split("(")[0].split(".")[-1]])


SYM = "(lambda a: a + a.mT)(torch.randn(3, 5, 5))"
# symmetric, indefinite, |eigenvalues| in [0.5, 1.5]: a pseudo-inverse's error grows with the
# condition number, and a random SYM is near-singular often enough to fail one trial in many
SYM_WELL = ("(lambda q, w: (q * w.unsqueeze(-2)) @ q.mT)(torch.linalg.qr(torch.randn(3, 5, 5))[0], "
            "(torch.rand(3, 5) + 0.5) * torch.randn(3, 5).sign())")
REDUCED_SVD = "torch.linalg.svd(x, full_matrices=False)"


@pytest.mark.parametrize("expr,inputs,label", [
    ("torch.linalg.eigvalsh(x)", SYM, "eigh"),
    ("torch.linalg.eigvalsh(x, UPLO='U')", "torch.randn(2, 4, 4)", "eigh"),  # the upper triangle read
    ("torch.linalg.eigvalsh(x)", "torch.randn(6, 6).tril() @ torch.randn(6, 6).tril().mT", "eigh"),  # one matrix
    # eigenvectors through what their signs do not change: V diag(w) V^T, V^T V
    ("(lambda w, v: (v * w.unsqueeze(-2)) @ v.mT + v.mT @ v)(*torch.linalg.eigh(x))", SYM, "eigh"),
    ("torch.linalg.pinv(x, hermitian=True)", SYM_WELL, "eigh"),
    ("torch.linalg.svdvals(x)", "torch.randn(3, 6, 4)", "svd"),  # tall
    ("torch.linalg.svdvals(x)", "torch.randn(2, 3, 7)", "svd"),  # wide: Jacobi on A^T
    ("torch.linalg.pinv(x)", "torch.randn(3, 6, 4)", "svd"),
    ("torch.linalg.pinv(x)", "torch.randn(3, 4, 6)", "svd"),
    ("torch.linalg.matrix_rank(x)", "torch.randn(3, 6, 2) @ torch.randn(3, 2, 5)", "svd"),  # rank 2
    ("torch.linalg.cond(x)", "torch.randn(3, 4, 4) * 0.3 + 2 * torch.eye(4)", "svd"),
    # U S Vh rebuilds A, and U, V have orthonormal columns, whatever their signs
    (f"(lambda u, s, vh: ((u * s.unsqueeze(-2)) @ vh, u.mT @ u, vh @ vh.mT))(*{REDUCED_SVD})", "torch.randn(3, 5, 3)",
     "svd"),
    (f"(lambda u, s, vh: ((u * s.unsqueeze(-2)) @ vh, u @ u.mT, vh @ vh.mT))(*{REDUCED_SVD})", "torch.randn(2, 3, 5)",
     "svd"),
])
def test_jacobi_eigh_and_svd(cpu_verifier, expr, inputs, label):
    check(cpu_verifier, source(expr, inputs, "x"), [label], second=not inputs.startswith("torch.randn(6, 6)"))


@pytest.mark.parametrize("expr,inputs", [
    ("torch.linalg.qr(x)", "torch.randn(3, 6, 4)"),  # tall, reduced
    ("torch.linalg.qr(x, mode='complete')", "torch.randn(3, 6, 4)"),
    ("torch.linalg.qr(x)", "torch.randn(2, 3, 5)"),  # wide
    ("torch.linalg.qr(x, mode='r')[1]", "torch.randn(3, 5, 5)"),
    # a column already zero below its diagonal: no reflection there (tau 0), as geqrf
    ("torch.linalg.qr(x)", "torch.randn(3, 5, 4).triu()"),
])
def test_householder_qr_is_lapacks(cpu_verifier, expr, inputs):
    """Householder QR with LAPACK's signs gives LAPACK's Q and R (no sign freedom to differ in)."""
    check(cpu_verifier, source(expr, inputs, "x"), ["qr"])


def test_full_singular_vectors_of_a_rectangular_matrix_are_left_to_pytorch(cpu_verifier):
    """full_matrices=True completes U or V past the rank: no Triton plan in strict mode, PyTorch
    keeps it in mixed mode."""
    src = source("torch.linalg.svd(x)[0].abs().sum(-1)", "torch.randn(2, 5, 3)", "x")
    problem, graph, _ = capture(src)
    assert next(iter(BuiltinPolicy("cpu").candidates(problem, graph, "strict")), None) is None


def test_large_matrices_fall_back_in_mixed_mode(cpu_verifier):
    """A matrix wider than one program holds: Unsupported in strict mode (said why); mixed mode
    keeps the inverse in PyTorch and the rest in Triton."""
    n = factorization.MAX_N + 1
    src = source("torch.relu(torch.linalg.inv(x))", f"torch.randn(1, {n}, {n}) + {n} * torch.eye({n})", "x")
    problem, graph, _ = capture(src)
    program = Program(graph)
    frag = next(f for f in program.fragments(fuse=False) if f.kind == "factorization")
    with pytest.raises(Unsupported, match=f"at most {factorization.MAX_N}"):
        factorization.emit(program, frag, {}, Names(), device="cpu")
    assert next(iter(BuiltinPolicy("cpu").candidates(problem, graph, "strict")), None) is None
    cand = check(cpu_verifier, src, ["relu"], mode="mixed", second=False)
    assert any(line.startswith("inv:") and "PyTorch" in line for line in cand.plan), cand.plan


def test_not_drawn_by_synthesis():
    names = {op.name for op in ops.by_category("factorization")}
    assert names == factorization.OPS
    assert not names & set(ops.SYNTH_NAMES)
