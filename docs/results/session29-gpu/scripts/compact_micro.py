"""Compaction variants timed in one run (medians of CUDA-event timings, fresh mask per shape):
eager masked_select; the lowering's form (cumsum, unkept rows to one spare row, index_put);
unkept rows spread over S spare rows; a Triton masked store from the cumsum."""
import sys, json, statistics
import torch, triton, triton.language as tl

@triton.jit
def masked_store(x, keep, cs, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = i < n
    k = tl.load(keep + i, mask=ok, other=0) != 0
    at = tl.load(cs + i, mask=ok, other=1) - 1
    v = tl.load(x + i, mask=ok & k)
    tl.store(out + at, v, mask=ok & k)

def t(fn, reps=50):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) * 1000)
    return statistics.median(ts)

rows = []
for n, frac in [(4096 * 1024, 0.13), (4096 * 1024, 0.5), (4096 * 1024, 0.95), (2048 * 1024, 0.5)]:
    x = torch.randn(n, device="cuda")
    m = torch.rand(n, device="cuda") < frac
    count = int(m.sum())
    cs = torch.cumsum(m, 0)
    ref = torch.masked_select(x, m)
    r = {"n": n, "frac": frac}
    r["eager_masked_select"] = t(lambda: torch.masked_select(x, m))
    r["eager_cumsum_int64"] = t(lambda: torch.cumsum(m, 0))
    r["eager_sum_item"] = t(lambda: m.sum().item())
    one = torch.where(m, cs - 1, count)
    ar = torch.arange(n, device="cuda")
    for S in (1, 32, 1024):
        at = torch.where(m, cs - 1, count + ar % S) if S > 1 else one
        def f(at=at, S=S):
            out = x.new_zeros(count + S)
            out.index_put_((at,), x)
            return out[:count]
        assert torch.equal(f(), ref)
        r[f"index_put_spare{S}"] = t(f)
    def g():
        out = x.new_empty(count)
        masked_store[(triton.cdiv(n, 1024),)](x, m, cs, out, n, BLOCK=1024)
        return out
    assert torch.equal(g(), ref)
    r["triton_masked_store"] = t(g)
    rows.append({k: (round(v, 1) if isinstance(v, float) and k != "frac" else v) for k, v in r.items()})
    print(json.dumps(rows[-1]), flush=True)
