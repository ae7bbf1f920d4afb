"""Small dense linear algebra (drtriton/ops/factorization.py): LU with partial pivoting and what
is built on it (lu_factor, lu, lu_unpack, lu_solve, det, slogdet, inv, solve), Cholesky
(cholesky, cholesky_solve, cholesky_inverse), triangular solves, and Jacobi rotations for
symmetric eigenproblems (eigh) and singular values (svd).

One template: a program owns one matrix of the batch (batch dims flattened, broadcast between
operands by the launcher) and holds it in registers as a (BLOCK, BLOCK) tile, BLOCK the next
power of two of its size, so sizes are bounded (`MAX_N`; larger is Unsupported: PyTorch keeps
them in mixed mode). Right-hand sides are a (BLOCK, BK) tile beside it. The factorization is a
loop over pivots: a row or column is read out of the tile by a masked sum (no dynamic indexing
in registers), rows are swapped and the trailing matrix updated by masked rank-1 updates
(`tl.where` on the row and column indices). Strides carry every transpose: A^T, B^T and
upper-triangular factors are the same tile loaded with its strides swapped.

LU is LAPACK getrf's: the pivot is the first row of the largest |a| in the column, pivots are
1-based int32, info the first zero pivot (1-based; 0 if none), and a zero pivot leaves its
column alone. Like PyTorch, det, slogdet, solve and inv factor A^T when A is contiguous (same
values; LU and pivots are then those of A^T, as PyTorch returns them) and solve through it with
the adjoint. Solves follow getrs: the row interchanges, then substitution with unit L and with
U (adjoint: U^T, L^T, then the interchanges in reverse). Cholesky is the right-looking
outer-product form; on a matrix that is not positive-definite it stops at the first pivot that
is not positive (info, 1-based) and returns what LAPACK's unblocked potf2 leaves (columns before
it factored, the updated pivot, A's own values after it; a blocked potrf, for larger matrices,
may leave other partial values, which PyTorch does not specify). QR is geqr2's Householder
reflections with slarfg's sign (beta = -sign(alpha) |x|; none where the column below the
diagonal is 0), so Q and R are LAPACK's, and Q the reflections applied to the identity (orgqr).
Everything accumulates in float32, as LAPACK's float32 routines do.

eigh is the cyclic Jacobi method on the symmetric matrix of A's lower (or upper) triangle: each
rotation zeroes one off-diagonal pair, rows then columns, `SWEEPS` sweeps over every pair; the
diagonal is then the eigenvalues (ascending, as LAPACK), the accumulated rotations the
eigenvectors. svd is one-sided Jacobi (Hestenes) on the columns of A, or of A^T when A is wide:
each rotation makes two columns orthogonal; the column norms are the singular values
(descending), the normalised columns U, the rotations V. Eigenvectors and singular vectors are
unique only up to sign, which LAPACK does not fix: what stands on them (pinv, projections) agrees
with PyTorch, the vectors themselves may differ in sign.
"""

from __future__ import annotations

from ..program import Fragment, Program
from . import Emitted, Names, Unsupported, empty

OPS = {"lu_factor", "lu", "lu_unpack", "lu_solve", "det", "slogdet", "inv", "solve", "cholesky", "cholesky_solve",
       "cholesky_inverse", "solve_triangular", "triangular_solve", "eigh", "svd", "qr"}
#: the largest matrix (and right-hand side width) one program holds: a 64 x 64 fp32 tile is 16 KB
#: of registers per program, and the loop is O(n^3) masked work
MAX_N = 64

#: what each captured aten operator returns, by role, in order
ROLES = {
    "aten.linalg_lu_factor_ex.default": ("LU", "pivots", "info"),
    "aten.linalg_lu_factor.default": ("LU", "pivots"),
    "aten.linalg_lu.default": ("P", "L", "U"),
    "aten.lu_unpack.default": ("P", "L", "U"),
    "aten.linalg_lu_solve.default": ("X",),
    "aten._linalg_det.default": ("det", "LU", "pivots"),
    "aten.linalg_det.default": ("det",),
    "aten.det.default": ("det",),
    "aten._linalg_slogdet.default": ("sign", "logabsdet", "LU", "pivots"),
    "aten.linalg_inv.default": ("X",),
    "aten.inverse.default": ("X",),
    "aten.linalg_tensorinv.default": ("X",),
    "aten.linalg_inv_ex.default": ("X", "info"),
    "aten.linalg_solve.default": ("X",),
    "aten._linalg_solve_ex.default": ("X", "LU", "pivots", "info"),
    "aten.linalg_solve_ex.default": ("X", "info"),
    "aten.cholesky.default": ("L",),
    "aten.linalg_cholesky.default": ("L",),
    "aten.linalg_cholesky_ex.default": ("L", "info"),
    "aten.cholesky_solve.default": ("X",),
    "aten.cholesky_inverse.default": ("X",),
    "aten.linalg_solve_triangular.default": ("X",),
    "aten.triangular_solve.default": ("X", "A"),
    "aten._linalg_eigh.default": ("eigenvalues", "eigenvectors"),
    "aten._linalg_svd.default": ("U", "S", "Vh"),
    "aten.linalg_qr.default": ("Q", "R"),
}
#: Jacobi sweeps over every pair: convergence is quadratic once the off-diagonal part is small;
#: in a float32 replica a square 64 x 64 SVD settled after 9 sweeps (a 10th confirms), so 15
#: leave a margin (a settled sweep rotates by nothing)
SWEEPS = 15

_SWAPPED = "({0}.stride(0), {0}.stride(2), {0}.stride(1))"  # the transpose of each matrix of a batch


def configs(program: Program, frag: Fragment) -> list[dict]:
    return [{}]


# -- kernel lines ---------------------------------------------------------------------------------

def _load(tile: str, ptr: str, rows: str, cols: str, width: str = "ci") -> list[str]:
    """The program's matrix of `ptr` (rows x cols, through its strides) as a zero-padded fp32 tile."""
    return [f"{tile} = tl.load({ptr} + pid * {ptr}_sb + ri[:, None] * {ptr}_sr + {width}[None, :] * {ptr}_sc,",
            f"            mask=(ri[:, None] < {rows}) & ({width}[None, :] < {cols}), other=0.0).to(tl.float32)"]


def _store(ptr: str, tile: str, rows: str, cols: str, width: str = "ci") -> list[str]:
    return [f"tl.store({ptr} + pid * {ptr}_sb + ri[:, None] * {ptr}_sr + {width}[None, :] * {ptr}_sc, {tile},",
            f"         mask=(ri[:, None] < {rows}) & ({width}[None, :] < {cols}))"]


def _lu(perm: bool = False, det: bool = False, slog: bool = False) -> list[str]:
    """Factor tile F (M x N) in place, LAPACK getrf's way, over its K = min(M, N) pivots: `piv`
    (1-based), `info`; with `perm` the row permutation (row i of P^T A is row perm[i] of A), with
    `det` / `slog` the determinant / its sign and log |.| (U's diagonal, signed by the swaps)."""
    lines = ["piv = tl.zeros([BLOCK], dtype=tl.int32)",
             "info = tl.sum(piv, axis=0)  # an int32 scalar: the first zero pivot, 1-based (0: none)",
             "swaps = info"]
    if perm:
        lines.append("perm = ri")
    if det or slog:
        lines.append("one = tl.sum(tl.zeros([BLOCK], dtype=tl.float32), axis=0) + 1.0")
    if det:
        lines.append("det = one")
    if slog:
        lines += ["sgn = one", "logabs = one - 1.0"]
    body = [
        "# the pivot: the first row at or below k holding the largest |a| of column k (LAPACK's isamax)",
        "col = tl.sum(tl.where(ci[None, :] == k, F, 0.0), axis=1)",
        "mag = tl.where((ri >= k) & (ri < M), tl.abs(col), -1.0)",
        "p = tl.min(tl.where(mag == tl.max(mag, axis=0), ri, BLOCK), axis=0)",
        "piv = tl.where(ri == k, p + 1, piv)",
        "swaps += (p != k).to(tl.int32)",
        "rk = tl.sum(tl.where(ri[:, None] == k, F, 0.0), axis=0)",
        "rp = tl.sum(tl.where(ri[:, None] == p, F, 0.0), axis=0)",
        "F = tl.where(ri[:, None] == k, rp[None, :], tl.where(ri[:, None] == p, rk[None, :], F))",
        "d = tl.sum(tl.where(ci == k, rp, 0.0), axis=0)",
        "info = tl.where((info == 0) & (d == 0.0), k + 1, info)",
        "# multipliers (times the reciprocal, as getrf scales); a zero pivot's column is zero below it",
        "col = tl.sum(tl.where(ci[None, :] == k, F, 0.0), axis=1)",
        "l = tl.where(ri > k, col * tl.where(d != 0.0, 1.0 / tl.where(d != 0.0, d, 1.0), 0.0), 0.0)",
        "F = tl.where((ri[:, None] > k) & (ci[None, :] == k), l[:, None], F)",
        "F = F - tl.where((ri[:, None] > k) & (ci[None, :] > k), l[:, None] * rp[None, :], 0.0)",
    ]
    if perm:
        body += ["pk = tl.sum(tl.where(ri == k, perm, 0), axis=0)",
                 "pp = tl.sum(tl.where(ri == p, perm, 0), axis=0)",
                 "perm = tl.where(ri == k, pp, tl.where(ri == p, pk, perm))"]
    if det:
        body.append("det = det * d")
    if slog:
        body += ["sgn = sgn * tl.where(d > 0.0, 1.0, tl.where(d < 0.0, -1.0, 0.0))",
                 "logabs = logabs + tl.log(tl.abs(d))"]
    lines += ["for k in range(K):"] + [f"    {b}" for b in body]
    if det:
        lines.append("det = tl.where(swaps % 2 == 1, -det, det)")
    if slog:
        lines.append("sgn = tl.where(swaps % 2 == 1, -sgn, sgn)")
    return lines


def _perm_of_pivots() -> list[str]:
    """The row permutation of LAPACK pivots `piv` (1-based), as `_lu` keeps it."""
    return ["perm = ri",
            "for k in range(K):",
            "    p = tl.sum(tl.where(ri == k, piv, 0), axis=0) - 1",
            "    pk = tl.sum(tl.where(ri == k, perm, 0), axis=0)",
            "    pp = tl.sum(tl.where(ri == p, perm, 0), axis=0)",
            "    perm = tl.where(ri == k, pp, tl.where(ri == p, pk, perm))"]


def _interchange(reverse: bool) -> list[str]:
    """LAPACK's laswp on X: rows k and piv[k] - 1 swapped for k = 0..N-1 (or back from N-1)."""
    return ["for kk in range(N):",
            f"    k = {'N - 1 - kk' if reverse else 'kk'}",
            "    p = tl.sum(tl.where(ri == k, piv, 0), axis=0) - 1",
            "    xk = tl.sum(tl.where(ri[:, None] == k, X, 0.0), axis=0)",
            "    xp = tl.sum(tl.where(ri[:, None] == p, X, 0.0), axis=0)",
            "    X = tl.where(ri[:, None] == k, xp[None, :], tl.where(ri[:, None] == p, xk[None, :], X))"]


def _substitute(tile: str, lower: bool, unit: bool, trans: bool = False) -> list[str]:
    """X <- op(T)^-1 X for the triangular op(T) (T, or T^T with `trans`) of size N, reading only
    its `lower` (or upper) triangle: forward (or back) substitution, a rank-1 update per row."""
    column = (f"tl.sum(tl.where(ri[:, None] == k, {tile}, 0.0), axis=0)  # column k of T^T: row k of T" if trans
              else f"tl.sum(tl.where(ci[None, :] == k, {tile}, 0.0), axis=1)")
    lines = ["for kk in range(N):",
             f"    k = {'kk' if lower else 'N - 1 - kk'}",
             f"    t = {column}",
             "    xk = tl.sum(tl.where(ri[:, None] == k, X, 0.0), axis=0)"]
    if not unit:
        lines += ["    xk = xk / tl.sum(tl.where(ri == k, t, 0.0), axis=0)",
                  "    X = tl.where(ri[:, None] == k, xk[None, :], X)"]
    rest = "ri > k" if lower else "ri < k"
    return lines + [f"    X = X - tl.where(({rest})[:, None], t[:, None] * xk[None, :], 0.0)"]


def _lu_solve() -> list[str]:
    """X <- op(A)^-1 X from F = LU of A and `piv`: getrs (ADJ: A^T, as trans='T')."""
    plain = _interchange(False) + _substitute("F", lower=True, unit=True) + _substitute("F", lower=False, unit=False)
    adjoint = (_substitute("F", lower=True, unit=False, trans=True)
               + _substitute("F", lower=False, unit=True, trans=True) + _interchange(True))
    return (["if ADJ:  # A^T X = B: U^T, then L^T, then the interchanges in reverse"] + [f"    {x}" for x in adjoint]
            + ["else:"] + [f"    {x}" for x in plain])


def _cholesky() -> list[str]:
    """F's lower triangle (N x N) becomes L with A = L L^T; `info` the first pivot that is not
    positive (1-based), where the factorization stops."""
    return ["info = tl.sum(tl.zeros([BLOCK], dtype=tl.int32), axis=0)",
            "for k in range(N):",
            "    col = tl.sum(tl.where(ci[None, :] == k, F, 0.0), axis=1)",
            "    akk = tl.sum(tl.where(ri == k, col, 0.0), axis=0)",
            "    info = tl.where((info == 0) & (akk > 0.0), 0, tl.where(info == 0, k + 1, info))  # NaN fails too",
            "    go = info == 0",
            "    dk = tl.sqrt(tl.where(go, akk, 1.0))",
            "    l = tl.where(ri > k, col * tl.where(go, 1.0 / dk, 0.0), 0.0)",
            "    F = tl.where((ri[:, None] > k) & (ci[None, :] == k), tl.where(go, l[:, None], F), F)",
            "    F = tl.where((ri[:, None] == k) & (ci[None, :] == k), tl.where(go, dk, akk), F)",
            "    F = F - tl.where((ri[:, None] > k) & (ci[None, :] > k), l[:, None] * l[None, :], 0.0)"]


def _householder(q: bool) -> list[str]:
    """F (M x N) to R by K = min(M, N) Householder reflections H_k = I - tau v v^T (LAPACK's
    geqr2 and slarfg); with `q`, Q = H_1 ... H_K accumulated from the identity (M x M)."""
    lines = ["Q = tl.where(ri[:, None] == ci[None, :], 1.0, 0.0)"] if q else []
    body = ["col = tl.sum(tl.where(ci[None, :] == k, F, 0.0), axis=1)",
            "alpha = tl.sum(tl.where(ri == k, col, 0.0), axis=0)",
            "below = tl.where((ri > k) & (ri < M), col, 0.0)",
            "xnorm = tl.sqrt(tl.sum(below * below, axis=0))",
            "go = xnorm != 0.0",
            "beta = tl.where(alpha >= 0.0, -1.0, 1.0) * tl.sqrt(alpha * alpha + xnorm * xnorm)",
            "tau = tl.where(go, (beta - alpha) / tl.where(go, beta, 1.0), 0.0)",
            "v = tl.where(ri == k, 1.0, below / tl.where(go, alpha - beta, 1.0))",
            "w = tl.sum(v[:, None] * F, axis=0)",
            "F = F - tau * v[:, None] * w[None, :]",
            "# column k exactly as geqr2 leaves R: beta on the diagonal, zeros below",
            "F = tl.where((ci[None, :] == k) & (ri[:, None] > k), 0.0, F)",
            "F = tl.where((ci[None, :] == k) & (ri[:, None] == k), tl.where(go, beta, alpha), F)"]
    if q:
        body += ["vc = tl.sum(tl.where(ri[:, None] == ci[None, :], v[:, None], 0.0), axis=0)",
                 "qv = tl.sum(Q * vc[None, :], axis=1)",
                 "Q = Q - tau * qv[:, None] * vc[None, :]"]
    return lines + ["for k in range(K):"] + [f"    {line}" for line in body]


def _rotation(a: str, b: str, g: str) -> list[str]:
    """c, s of the Jacobi rotation that zeroes `g` between coordinates p and q with diagonal (or
    squared norms) `a`, `b`: t the smaller root of t^2 + 2 tau t - 1 = 0 (Golub and Van Loan's
    sym.schur2); none when g is 0."""
    return [f"rot = {g} != 0.0",
            f"tau = ({b} - {a}) / (2.0 * tl.where(rot, {g}, 1.0))",
            "t = tl.where(rot, tl.where(tau >= 0.0, 1.0, -1.0) / (tl.abs(tau) + tl.sqrt(1.0 + tau * tau)), 0.0)",
            "c = 1.0 / tl.sqrt(1.0 + t * t)",
            "s = t * c"]


def _rotate_columns(tile: str) -> list[str]:
    """Columns p and q of `tile` rotated by (c, s)."""
    return [f"cp = tl.sum(tl.where(ci[None, :] == p, {tile}, 0.0), axis=1)",
            f"cq = tl.sum(tl.where(ci[None, :] == q, {tile}, 0.0), axis=1)",
            f"{tile} = tl.where(ci[None, :] == p, (c * cp - s * cq)[:, None],",
            f"    tl.where(ci[None, :] == q, (s * cp + c * cq)[:, None], {tile}))"]


def _sweeps(body: list[str]) -> list[str]:
    """`body` for every pair p < q of the N columns, SWEEPS times."""
    return (["for sweep in range(SWEEPS):", "    for p in range(N - 1):", "        for q in range(p + 1, N):"]
            + [f"            {line}" for line in body])


def _jacobi_eigh(vectors: bool) -> list[str]:
    """S (symmetric, N x N) to diagonal by two-sided rotations; V accumulates them."""
    body = ["rp = tl.sum(tl.where(ri[:, None] == p, S, 0.0), axis=0)",
            "rq = tl.sum(tl.where(ri[:, None] == q, S, 0.0), axis=0)",
            *_rotation("tl.sum(tl.where(ci == p, rp, 0.0), axis=0)", "tl.sum(tl.where(ci == q, rq, 0.0), axis=0)",
                       "tl.sum(tl.where(ci == q, rp, 0.0), axis=0)"),
            "S = tl.where(ri[:, None] == p, (c * rp - s * rq)[None, :],",
            "    tl.where(ri[:, None] == q, (s * rp + c * rq)[None, :], S))",
            *_rotate_columns("S")]
    if vectors:
        body += _rotate_columns("V")
    return _sweeps(body)


def _jacobi_svd(vectors: bool) -> list[str]:
    """G's N columns made orthogonal by one-sided rotations; V accumulates them."""
    body = ["gp = tl.sum(tl.where(ci[None, :] == p, G, 0.0), axis=1)",
            "gq = tl.sum(tl.where(ci[None, :] == q, G, 0.0), axis=1)",
            *_rotation("tl.sum(gp * gp, axis=0)", "tl.sum(gq * gq, axis=0)", "tl.sum(gp * gq, axis=0)"),
            "G = tl.where(ci[None, :] == p, (c * gp - s * gq)[:, None],",
            "    tl.where(ci[None, :] == q, (s * gp + c * gq)[:, None], G))"]
    if vectors:
        body += _rotate_columns("V")
    return _sweeps(body)


def _ranked(v: str, descending: bool) -> list[str]:
    """`rank` (over ci) of each of the N values `v` (over ci) in sorted order, ties by position,
    and `w` (over ri) the sorted values."""
    return [f"key = tl.where(ci < N, {'-' if descending else ''}{v}, float('inf'))",
            "keyr = tl.sum(tl.where(ri[:, None] == ci[None, :], key[None, :], 0.0), axis=1)",
            "before = (keyr[:, None] < key[None, :]) | ((keyr[:, None] == key[None, :]) & (ri[:, None] < ci[None, :]))",
            "rank = tl.sum(before.to(tl.int32), axis=0)",
            f"w = tl.sum(tl.where(rank[None, :] == ri[:, None], {v}[None, :], 0.0), axis=1)"]


def _permute_columns(tile: str) -> list[str]:
    """Column j of `tile` moved to column rank[j]."""
    return [f"{tile}s = {tile} * 0.0",
            "for j in range(N):",
            f"    col = tl.sum(tl.where(ci[None, :] == j, {tile}, 0.0), axis=1)",
            "    r = tl.sum(tl.where(ci == j, rank, 0), axis=0)",
            f"    {tile}s = tl.where(ci[None, :] == r, col[:, None], {tile}s)"]


# -- the kernel and its launch ----------------------------------------------------------------------

class _Kernel:
    """A kernel's parameters and the launcher's arguments for them, written side by side."""

    def __init__(self):
        self.params: list[str] = []
        self.args: list[str] = []
        self.body: list[str] = []

    def matrix(self, name: str, var: str, strides: str | None = None) -> None:
        """`var` a (batch, rows, cols) launcher tensor; `strides` a 3-tuple expression (its own by default)."""
        self.params += [name, f"{name}_sb", f"{name}_sr", f"{name}_sc"]
        self.args += [var, f"*{strides or f'{var}.stride()'}"]

    def value(self, name: str, expr: str) -> None:
        self.params.append(name)
        self.args.append(expr)


def _used(program: Program, frag: Fragment, value: str) -> bool:
    return value in program.values and program.used_outside(value, {n.name for n in frag.nodes})


def emit(program: Program, frag: Fragment, config: dict, names: Names, device: str = "cuda") -> Emitted:
    node = frag.anchor
    op = node.op
    if op not in OPS or node.target not in ROLES:
        raise Unsupported(op)
    if frag.prologue or frag.epilogue or len(frag.nodes) > 1:
        raise Unsupported("a factorization with fused operators")
    ins = program.inputs_of(node)
    for v in ins:
        dtype = program.values[v].dtype
        if dtype != "torch.float32" and not (op in ("lu_unpack", "lu_solve") and v == ins[1]):
            raise Unsupported(f"a {dtype} {op}")
    sizes = [d for v in ins for d in program.values[v].shape[-2:]]
    if op == "inv" and node.attrs.get("ind") is not None:
        shape = program.values[ins[0]].shape
        sizes = [_prod(shape[node.attrs["ind"]:])]
    if max(sizes, default=0) > MAX_N:
        raise Unsupported(f"{op} of a {max(sizes)}-wide matrix: one program holds at most {MAX_N} x {MAX_N}")
    outs = {role: value for role, value in zip(ROLES[node.target], node.outputs) if _used(program, frag, value)}
    if not outs:
        raise Unsupported("no output used")

    name = names.kernel(frag.label)
    kernel = _Kernel()
    builder = _LU_FAMILY if op in _LU_FAMILY else _OTHERS
    lines = builder[op](program, node, ins, outs, kernel)
    constexpr = [p for p in ("BLOCK", "BK", "ADJ", "SWEEPS") if f"{p}=" in lines[-1]]
    source = "\n".join([
        "@triton.jit",
        f"def {name}({', '.join(kernel.params + [f'{p}: tl.constexpr' for p in constexpr])}):",
        f"    # {op}: one matrix of the batch per program, held in registers as a (BLOCK, BLOCK) tile",
        "    pid = tl.program_id(0).to(tl.int64)",
        "    ri = tl.arange(0, BLOCK)",
        "    ci = tl.arange(0, BLOCK)",
        *(["    ki = tl.arange(0, BK)"] if "BK" in constexpr else []),
        *(f"    {line}" for line in kernel.body),
    ])
    launch = lines[-1].replace("KERNEL", name).replace("ARGS", ", ".join(kernel.args))
    return Emitted([source], [f"# {frag.label}: Triton, a matrix per program"] + lines[:-1] + launch.split("\n"))


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def _alloc(program: Program, value: str, shape: str, dtype: str = "torch.float32") -> str:
    return f"{program.expr(value)} = {empty(shape, len(program.values[value].shape), '_dev', dtype)}"


def _launch(block: str, bk: str | None = None, adj: str | None = None, sweeps: bool = False) -> str:
    extra = (f", BK={bk}" if bk else "") + (f", ADJ={adj}" if adj else "") + (f", SWEEPS={SWEEPS}" if sweeps else "")
    return f"if _B:\n    KERNEL[(_B,)](ARGS, BLOCK={block}{extra}, num_warps=4)"


# -- LU and what stands on it -------------------------------------------------------------------

def _factor_outputs(program, outs, kernel, batch: str, m: str, n: str, k: str) -> list[str]:
    """Allocate and store LU / pivots / info (whichever are used)."""
    lines = []
    if "LU" in outs:
        lines += [_alloc(program, outs["LU"], f"(*{batch}, {m}, {n})"),
                  f"_lu3 = {program.expr(outs['LU'])}.view(-1, {m}, {n})"]
        kernel.matrix("lu_out", "_lu3")
        kernel.body += _store("lu_out", "F", "M", "N")
    if "pivots" in outs:
        lines.append(_alloc(program, outs["pivots"], f"(*{batch}, {k})", "torch.int32"))
        kernel.value("piv_out", program.expr(outs["pivots"]))
        kernel.body.append("tl.store(piv_out + pid * K + ri, piv, mask=ri < K)")
    if "info" in outs:
        lines.append(_alloc(program, outs["info"], f"{batch}", "torch.int32"))
        kernel.value("info_out", program.expr(outs["info"]))
        kernel.body.append("tl.store(info_out + pid, info)")
    return lines


def _one_matrix(program, x: str, reshape: str | None = None) -> list[str]:
    src = program.expr(x)
    return [f"_a = {src}" + (f".reshape({reshape})" if reshape else ""),
            "_dev, _batch, _m, _n = _a.device, _a.shape[:-2], _a.shape[-2], _a.shape[-1]",
            "_a3 = _a.reshape(-1, _m, _n)", "_B = _a3.shape[0]"]


def _emit_lu_factor(program, node, ins, outs, kernel):
    lines = _one_matrix(program, ins[0]) + ["_k = min(_m, _n)"]
    kernel.matrix("a", "_a3")
    kernel.value("M", "_m"), kernel.value("N", "_n"), kernel.value("K", "_k")
    kernel.body += _load("F", "a", "M", "N") + _lu()
    lines += _factor_outputs(program, outs, kernel, "_batch", "_m", "_n", "_k")
    return lines + [_launch("max(_next_pow2(max(_m, _n)), 2)")]


def _unpacked(program, outs, kernel) -> list[str]:
    """P (M x M), L (M x K), U (K x N) from F and `perm`."""
    lines = []
    stores = {"P": ("(*_batch, _m, _m)", "tl.where(ri[:, None] == perm[None, :], 1.0, 0.0)", "M", "M"),
              "L": ("(*_batch, _m, _k)",
                    "tl.where(ri[:, None] > ci[None, :], F, tl.where(ri[:, None] == ci[None, :], 1.0, 0.0))", "M", "K"),
              "U": ("(*_batch, _k, _n)", "tl.where(ri[:, None] <= ci[None, :], F, 0.0)", "K", "N")}
    for role, (shape, tile, rows, cols) in stores.items():
        if role in outs:
            out = program.expr(outs[role])
            lines += [_alloc(program, outs[role], shape), f"_{role.lower()}3 = {out}.view(-1, *{out}.shape[-2:])"]
            kernel.matrix(f"{role.lower()}_out", f"_{role.lower()}3")
            kernel.body += _store(f"{role.lower()}_out", tile, rows, cols)
    return lines


def _emit_lu(program, node, ins, outs, kernel):
    lines = _one_matrix(program, ins[0]) + ["_k = min(_m, _n)"]
    kernel.matrix("a", "_a3")
    kernel.value("M", "_m"), kernel.value("N", "_n"), kernel.value("K", "_k")
    kernel.body += _load("F", "a", "M", "N")
    if node.op == "lu":
        kernel.body += _lu(perm=True)
    else:  # lu_unpack: the factorization given, its permutation from the pivots
        lines += [f"_p2 = {program.expr(ins[1])}.reshape(-1, _k)"]
        kernel.matrix("pv", "_p2", "(_p2.stride(0), 0, _p2.stride(1))")
        kernel.body += ["piv = tl.load(pv + pid * pv_sb + ri * pv_sc, mask=ri < K, other=0).to(tl.int32)"]
        kernel.body += _perm_of_pivots()
    lines += _unpacked(program, outs, kernel)
    return lines + [_launch("max(_next_pow2(max(_m, _n)), 2)")]


def _emit_det(program, node, ins, outs, kernel):
    """det / slogdet: A^T factored when A is contiguous, as PyTorch does (the same determinant;
    LU and pivots then as PyTorch returns them)."""
    lines = _one_matrix(program, ins[0]) + ["_k = _n", f"_t = {program.expr(ins[0])}.is_contiguous()"]
    kernel.matrix("a", "_a3", f"({_SWAPPED.format('_a3')} if _t else _a3.stride())")
    kernel.value("M", "_m"), kernel.value("N", "_n"), kernel.value("K", "_k")
    kernel.body += _load("F", "a", "M", "N") + _lu(det="det" in outs, slog="sign" in outs or "logabsdet" in outs)
    for role, var in (("det", "det"), ("sign", "sgn"), ("logabsdet", "logabs")):
        if role in outs:
            lines.append(_alloc(program, outs[role], "_batch"))
            kernel.value(f"{role}_out", program.expr(outs[role]))
            kernel.body.append(f"tl.store({role}_out + pid, {var})")
    lines += _factor_outputs(program, outs, kernel, "_batch", "_m", "_n", "_k")
    return lines + [_launch("max(_next_pow2(_n), 2)")]


def _rhs(program, kernel, b3: str, transposed: bool, x_shape: str, x_value: str) -> list[str]:
    """Load X from `b3` (B, or B^T for a right-hand solve), and store X into the output
    `x_value` (allocated with `x_shape`, viewed like `b3`)."""
    strides = _SWAPPED.format(b3) if transposed else None
    kernel.matrix("b", b3, strides)
    kernel.body[:0] = _load("X", "b", "N", "R", "ki")
    out = program.expr(x_value)
    lines = [_alloc(program, x_value, x_shape), f"_x3 = {out}.view({b3}.shape)"]
    kernel.matrix("x_out", "_x3", _SWAPPED.format("_x3") if transposed else None)
    return lines


def _emit_solve(program, node, ins, outs, kernel):
    """solve, inv, lu_solve: X = op(A)^-1 B through A's LU (lu_solve: given)."""
    op, a = node.op, ins[0]
    left = node.attrs.get("left", True)
    ashape = program.values[a].shape
    ind = node.attrs.get("ind")
    if op == "inv":
        reshape = None if ind is None else f"{_prod(ashape[:ind])}, {_prod(ashape[ind:])}"
        lines = _one_matrix(program, a, reshape)
    else:
        b = ins[2] if op == "lu_solve" else ins[1]
        bshape = program.values[b].shape
        vector = op == "solve" and (len(bshape) == 1 or (len(bshape) == len(ashape) - 1 and bshape == ashape[:-1]))
        bexpr = program.expr(b) + (".unsqueeze(-1)" if vector else "")
        lines = [f"_A, _b = {program.expr(a)}, {bexpr}",
                 "_dev, _n = _A.device, _A.shape[-1]",
                 "_batch = torch.broadcast_shapes(_A.shape[:-2], _b.shape[:-2])",
                 "_a3 = _A.expand(*_batch, _n, _n).reshape(-1, _n, _n)",
                 "_b3 = _b.expand(*_batch, *_b.shape[-2:]).reshape(-1, *_b.shape[-2:])",
                 "_B, _r = _a3.shape[0], _b3.shape[2 if " + str(left) + " else 1]"]
        if op == "lu_solve":
            lines.append(f"_p2 = {program.expr(ins[1])}.expand(*_batch, _n).reshape(-1, _n)")
    if op == "lu_solve":  # F is A's LU as given
        lines.append(f"_adj = {node.attrs.get('adjoint', False) != (not left)}")
        kernel.matrix("a", "_a3")
    else:  # A^T factored when A is contiguous, as PyTorch: then solved through its adjoint
        lines += [f"_t = {program.expr(a)}.is_contiguous()", f"_adj = _t != {not left}"]
        kernel.matrix("a", "_a3", f"({_SWAPPED.format('_a3')} if _t else _a3.stride())")
    kernel.value("N", "_n"), kernel.value("K", "_n")
    if op == "inv":
        lines += ["_r = _n", _alloc(program, outs["X"], "_a.shape" if ind is None else
                                    f"(*{tuple(ashape[ind:])}, *{tuple(ashape[:ind])})"),
                  f"_x3 = {program.expr(outs['X'])}.view(-1, _n, _n)"]
        kernel.matrix("x_out", "_x3")
        kernel.body += ["X = tl.where((ri[:, None] == ki[None, :]) & (ri[:, None] < N), 1.0, 0.0)"]
    elif "X" in outs:
        xshape = "(*_batch, _n)" if vector else "(*_batch, *_b.shape[-2:])"
        lines += _rhs(program, kernel, "_b3", not left, xshape, outs["X"])
    else:
        raise Unsupported("a solve without its solution")
    kernel.value("R", "_r")
    kernel.body += _load("F", "a", "N", "N")
    if op == "lu_solve":
        kernel.matrix("pv", "_p2", "(_p2.stride(0), 0, _p2.stride(1))")
        kernel.body += ["piv = tl.load(pv + pid * pv_sb + ri * pv_sc, mask=ri < K, other=0).to(tl.int32)"]
    else:
        kernel.value("M", "_n")
        kernel.body += _lu()
    kernel.body += _lu_solve() + _store("x_out", "X", "N", "R", "ki")
    lines += _factor_outputs(program, outs, kernel, "_batch", "_n", "_n", "_n")
    return lines + [_launch("max(_next_pow2(_n), 2)", "max(_next_pow2(_r), 2)", "_adj")]


_LU_FAMILY = {"lu_factor": _emit_lu_factor, "lu": _emit_lu, "lu_unpack": _emit_lu, "det": _emit_det,
              "slogdet": _emit_det, "inv": _emit_solve, "solve": _emit_solve, "lu_solve": _emit_solve}


# -- Cholesky and triangular solves ------------------------------------------------------------

def _emit_cholesky(program, node, ins, outs, kernel):
    """upper: U = L^T of A's upper triangle read as the lower one of A^T (swapped strides)."""
    upper = node.attrs.get("upper", False)
    lines = _one_matrix(program, ins[0])
    swap = _SWAPPED.format("_a3") if upper else None
    kernel.matrix("a", "_a3", swap)
    kernel.value("N", "_n")
    kernel.body += _load("F", "a", "N", "N") + (["A0 = F"] if "L" in outs else []) + _cholesky()
    if "L" in outs:
        out = program.expr(outs["L"])
        lines += [_alloc(program, outs["L"], "_a.shape"), f"_l3 = {out}.view(-1, _n, _n)"]
        kernel.matrix("l_out", "_l3", _SWAPPED.format("_l3") if upper else None)
        # a failure at pivot f (info - 1) leaves what LAPACK's unblocked potf2 leaves, which works
        # column by column: A's own values below f and right of it, the updated a_ff at f
        kernel.body += ["f = tl.where(info > 0, info - 1, N)",
                        "L = tl.where((ci[None, :] < f) | ((ri[:, None] == f) & (ci[None, :] == f)), F, A0)"]
        kernel.body += _store("l_out", "tl.where(ri[:, None] >= ci[None, :], L, 0.0)", "N", "N")
    if "info" in outs:
        lines.append(_alloc(program, outs["info"], "_batch", "torch.int32"))
        kernel.value("info_out", program.expr(outs["info"]))
        kernel.body.append("tl.store(info_out + pid, info)")
    return lines + [_launch("max(_next_pow2(_n), 2)")]


def _two_matrices(program, a: str, b: str) -> list[str]:
    return [f"_A, _b = {program.expr(a)}, {program.expr(b)}",
            "_dev, _n = _A.device, _A.shape[-1]",
            "_batch = torch.broadcast_shapes(_A.shape[:-2], _b.shape[:-2])",
            "_a3 = _A.expand(*_batch, _n, _n).reshape(-1, _n, _n)",
            "_b3 = _b.expand(*_batch, *_b.shape[-2:]).reshape(-1, *_b.shape[-2:])",
            "_B = _a3.shape[0]"]


def _emit_triangular(program, node, ins, outs, kernel):
    """cholesky_solve, cholesky_inverse: L then L^T (from L, or U^T); solve_triangular,
    triangular_solve: one substitution with T (A, or A^T: swapped strides)."""
    op, attrs = node.op, node.attrs
    upper = attrs.get("upper", False)
    if op == "cholesky_inverse":
        lines = _one_matrix(program, ins[0]) + ["_r = _n", _alloc(program, outs["X"], "_a.shape"),
                                                 f"_x3 = {program.expr(outs['X'])}.view(-1, _n, _n)"]
        kernel.matrix("x_out", "_x3")
        kernel.body += ["X = tl.where((ri[:, None] == ki[None, :]) & (ri[:, None] < N), 1.0, 0.0)"]
        trans, lower, unit, right = upper, True, False, False
    else:
        a, b = (ins[1], ins[0]) if op in ("cholesky_solve", "triangular_solve") else (ins[0], ins[1])
        right = op == "solve_triangular" and not attrs.get("left", True)
        transposed = right or (op == "triangular_solve" and attrs.get("transpose", False))
        # op(T) is lower when A is lower and read as is, or upper and transposed
        trans, lower = (upper, True) if op == "cholesky_solve" else (transposed, upper == transposed)
        unit = attrs.get("unitriangular", False)
        lines = _two_matrices(program, a, b) + [f"_r = _b3.shape[{1 if right else 2}]"]
        if "X" not in outs and op != "triangular_solve":
            raise Unsupported("no solution used")
        lines += _rhs(program, kernel, "_b3", right, "(*_batch, *_b.shape[-2:])", outs.get("X", node.outputs[0]))
    kernel.matrix("a", "_a3", _SWAPPED.format("_a3") if trans else None)
    kernel.value("N", "_n"), kernel.value("R", "_r")
    kernel.body += _load("T", "a", "N", "N")
    if op in ("cholesky_solve", "cholesky_inverse"):
        kernel.body += _substitute("T", lower=True, unit=False) + _substitute("T", lower=False, unit=False, trans=True)
    else:
        kernel.body += _substitute("T", lower=lower, unit=unit)
    kernel.body += _store("x_out", "X", "N", "R", "ki")
    if "A" in outs:  # triangular_solve's copy of A, broadcast to the batch
        out = program.expr(outs["A"])
        lines += [_alloc(program, outs["A"], "(*_batch, _n, _n)"), f"_c3 = {out}.view(-1, _n, _n)"]
        kernel.matrix("c_out", "_c3", _SWAPPED.format("_c3") if trans else None)
        kernel.body += _store("c_out", "T", "N", "N")
    return lines + [_launch("max(_next_pow2(_n), 2)", "max(_next_pow2(_r), 2)")]


# -- Jacobi: eigh and svd ------------------------------------------------------------------------

def _emit_eigh(program, node, ins, outs, kernel):
    """eigenvalues (ascending) and eigenvectors of the symmetric matrix of A's lower triangle
    (upper: its upper one)."""
    lines = _one_matrix(program, ins[0])
    kernel.matrix("a", "_a3")
    kernel.value("N", "_n")
    vectors = "eigenvectors" in outs
    keep = "ri[:, None] <= ci[None, :]" if node.attrs.get("upper", False) else "ri[:, None] >= ci[None, :]"
    kernel.body += _load("F", "a", "N", "N") + [f"S = tl.where({keep}, F, tl.trans(F))"]
    if vectors:
        kernel.body.append("V = tl.where(ri[:, None] == ci[None, :], 1.0, 0.0)")
    kernel.body += _jacobi_eigh(vectors) + _ranked("tl.sum(tl.where(ri[:, None] == ci[None, :], S, 0.0), axis=0)",
                                                   descending=False)
    if "eigenvalues" in outs:
        lines.append(_alloc(program, outs["eigenvalues"], "(*_batch, _n)"))
        kernel.value("w_out", program.expr(outs["eigenvalues"]))
        kernel.body.append("tl.store(w_out + pid * N + ri, w, mask=ri < N)")
    if vectors:
        lines += [_alloc(program, outs["eigenvectors"], "_a.shape"),
                  f"_v3 = {program.expr(outs['eigenvectors'])}.view(-1, _n, _n)"]
        kernel.matrix("v_out", "_v3")
        kernel.body += _permute_columns("V") + _store("v_out", "Vs", "N", "N")
    return lines + [_launch("max(_next_pow2(_n), 2)", sweeps=True)]


def _emit_svd(program, node, ins, outs, kernel):
    """S (descending), U, Vh (reduced) of A by one-sided Jacobi on a tall matrix: A, or A^T when
    A is wide (A^T = U' S V'^T: then U = V' and Vh = U'^T)."""
    shape = program.values[ins[0]].shape
    if node.attrs.get("full_matrices", True) and ("U" in outs or "Vh" in outs) and shape[-1] != shape[-2]:
        raise Unsupported("full U and V of a matrix that is not square (bases completed past its rank)")
    lines = _one_matrix(program, ins[0]) + ["_t = _m < _n", "_k = min(_m, _n)"]
    kernel.matrix("a", "_a3", f"({_SWAPPED.format('_a3')} if _t else _a3.stride())")
    kernel.value("M", "max(_m, _n)"), kernel.value("N", "_k")
    vectors = "U" in outs or "Vh" in outs
    kernel.body += _load("G", "a", "M", "N")
    if vectors:
        kernel.body.append("V = tl.where(ri[:, None] == ci[None, :], 1.0, 0.0)")
    kernel.body += _jacobi_svd(vectors) + ["sv = tl.sqrt(tl.sum(G * G, axis=0))"] + _ranked("sv", descending=True)
    if "S" in outs:
        lines.append(_alloc(program, outs["S"], "(*_batch, _k)"))
        kernel.value("s_out", program.expr(outs["S"]))
        kernel.body.append("tl.store(s_out + pid * N + ri, w, mask=ri < N)")
    if vectors:
        # the tall matrix's normalised columns (Q) and its rotations (V): U and Vh^T, or the other way
        for role, dims, flat in (("U", "_m, _k", "_u3"), ("Vh", "_k, _n", "_vh3")):
            if role in outs:
                lines += [_alloc(program, outs[role], f"(*_batch, {dims})"),
                          f"{flat} = {program.expr(outs[role])}.view(-1, {dims})"]
            else:  # not used: scratch the kernel writes all the same
                lines.append(f"{flat} = torch.empty(_B, {dims}, device=_dev, dtype=torch.float32)")
        lines.append("_q3, _w3 = (_vh3, _u3) if _t else (_u3, _vh3)")
        kernel.matrix("q_out", "_q3", f"({_SWAPPED.format('_q3')} if _t else _q3.stride())")
        kernel.matrix("v_out", "_w3", f"(_w3.stride() if _t else {_SWAPPED.format('_w3')})")
        kernel.body += ["Q = G * tl.where(sv > 0.0, 1.0 / tl.where(sv > 0.0, sv, 1.0), 0.0)[None, :]"]
        kernel.body += _permute_columns("Q") + _permute_columns("V")
        kernel.body += _store("q_out", "Qs", "M", "N") + _store("v_out", "Vs", "N", "N")
    return lines + [_launch("max(_next_pow2(max(_m, _n)), 2)", sweeps=True)]


def _emit_qr(program, node, ins, outs, kernel):
    """Q and R of A (mode reduced: Q (m, k), R (k, n); complete: (m, m), (m, n); r: R alone)."""
    mode = node.attrs.get("mode", "reduced")
    lines = _one_matrix(program, ins[0]) + ["_k = min(_m, _n)", f"_rows = {'_m' if mode == 'complete' else '_k'}"]
    kernel.matrix("a", "_a3")
    kernel.value("M", "_m"), kernel.value("N", "_n"), kernel.value("K", "_k"), kernel.value("RQ", "_rows")
    with_q = "Q" in outs and mode != "r"
    kernel.body += _load("F", "a", "M", "N") + _householder(with_q)
    if "R" in outs:
        lines += [_alloc(program, outs["R"], "(*_batch, _rows, _n)"), f"_r3 = {program.expr(outs['R'])}.view(-1, _rows, _n)"]
        kernel.matrix("r_out", "_r3")
        kernel.body += _store("r_out", "tl.where(ri[:, None] <= ci[None, :], F, 0.0)", "RQ", "N")
    if "Q" in outs:
        if mode == "r":  # PyTorch returns an empty Q
            lines.append(f"{program.expr(outs['Q'])} = torch.empty(0, device=_dev, dtype=torch.float32)")
        else:
            lines += [_alloc(program, outs["Q"], "(*_batch, _m, _rows)"),
                      f"_q3 = {program.expr(outs['Q'])}.view(-1, _m, _rows)"]
            kernel.matrix("q_out", "_q3")
            kernel.body += _store("q_out", "Q", "M", "RQ")
    return lines + [_launch("max(_next_pow2(max(_m, _n)), 2)")]


_OTHERS = {"eigh": _emit_eigh, "svd": _emit_svd, "qr": _emit_qr, "cholesky": _emit_cholesky, "cholesky_solve": _emit_triangular, "cholesky_inverse": _emit_triangular,
           "solve_triangular": _emit_triangular, "triangular_solve": _emit_triangular}
