"""Session 25, issue 17: the generated forward's host cost, old tree (A) against new (B), on the GPU.
B1 is B's source with A's _DirectLaunch class (the views change alone). Eager and torch.compile
in the same interleaved timing (the verifier's timer: sync, L2 flush, events), medians."""
import ast, collections, importlib.util, json, os, re, statistics, sys, time, traceback
sys.path.insert(0, os.getcwd())
import torch
from drtriton.problem import load_file
from drtriton.verify.worker.timing import time_interleaved
from benchmarks.kernel_profile import kernel_times

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.environ.get("OUT", "/tmp")
PROBLEMS = sys.argv[1:]


def load_source(src, name):
    path = f"/tmp/{name}.py"
    open(path, "w").write(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def launch_class(src):
    i = src.index("class _DirectLaunch")
    return src[i:src.index("# the kernels forward launches", i)]


def instrument(src):
    tree = ast.parse(src)
    cls = next(c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "ModelNew")
    fw = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "forward")
    tick = lambda: ast.parse("_T.append(_pc())").body[0]
    body, texts = [tick()], []
    for s in fw.body:
        if isinstance(s, ast.Return):
            body += [tick(), s]; texts.append("return"); continue
        body += [s, tick()]; texts.append(ast.unparse(s).split("\n")[0])
    fw.body = body
    return ast.unparse(ast.fix_missing_locations(tree)), texts


def kind(t):
    if re.search(r"_kernel\d*\[", t): return "launch"
    if t.startswith("if "): return "check"
    if "torch.empty" in t or "torch.zeros" in t: return "alloc"
    if "torch.ops." in t: return "aten-op"
    if ".contiguous()" in t: return "contiguous"
    if re.match(r"_path\d+ = ", t) or re.match(r"_\w+ = _path\d+\.", t): return "path"
    if re.search(r"\.(view|reshape|expand|transpose|unsqueeze|permute|squeeze|select|size)\(|\[.*:.*\]$", t): return "view"
    return "other"


def breakdown(src, init, sd, inputs):
    isrc, texts = instrument(src)
    T = []
    mod = load_source(isrc, "instrumented")
    mod._T, mod._pc = T, time.perf_counter_ns
    m = mod.ModelNew(*init).cuda(); m.load_state_dict(sd, strict=False)
    per = [[] for _ in texts]
    with torch.no_grad():
        for r in range(60):
            T.clear(); m(*inputs)
            if r >= 10:
                for i in range(len(texts)):
                    per[i].append(T[i + 1] - T[i])
            if r % 10 == 0:
                torch.cuda.synchronize()
    T.clear()
    for _ in range(1000): T.append(time.perf_counter_ns())
    ov = statistics.median(b - a for a, b in zip(T, T[1:]))
    med = [max(statistics.median(p) - ov, 0) / 1e3 for p in per]
    by = collections.defaultdict(lambda: [0, 0.0])
    for t, x in zip(texts, med):
        by[kind(t)][0] += 1; by[kind(t)][1] += x
    top = sorted(zip(med, texts), reverse=True)[:10]
    return {"total_us": sum(med), "by_kind": dict(by), "top": top}


def host_rate(fn, inputs, calls=50):
    """Host us per call, back to back with no sync (host-bound: the call's time)."""
    with torch.no_grad():
        fn(*inputs); torch.cuda.synchronize()
        best = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(calls): fn(*inputs)
            best.append((time.perf_counter() - t0) / calls * 1e6)
            torch.cuda.synchronize()
    return statistics.median(best)


results = {}
for stem in PROBLEMS:
    t_start = time.time()
    try:
        ns = {}
        exec(load_file(f"docs/results/session24-gpu/problems/{stem}.py").source, ns)
        init = ns["get_init_inputs"]()
        torch.manual_seed(0)
        ref = ns["Model"](*init).cuda().eval()
        sd = ref.state_dict()
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ns["get_inputs"]()]
        srcA = open(f"{HERE}/gA/{stem}.py").read()
        srcB = open(f"{HERE}/gB/{stem}.py").read()
        srcB1 = srcB.replace(launch_class(srcB), launch_class(srcA))
        models = {}
        for tag, src in (("A", srcA), ("B1", srcB1), ("B", srcB)):
            m = load_source(src, f"{tag}_{stem}").ModelNew(*init).cuda().eval()
            missing = m.load_state_dict(sd, strict=False)
            models[tag] = m
        with torch.no_grad():
            want = ref(*inputs)
            want = want[0] if isinstance(want, (tuple, list)) else want
            errs = {}
            for tag, m in models.items():
                got = m(*inputs); got = got[0] if isinstance(got, (tuple, list)) else got
                errs[tag] = float((got - want).abs().max())
        comp = torch.compile(ref)
        with torch.no_grad():
            comp(*inputs)
        t_compiled = time.time() - t_start
        fns = {"eager": ref, "compile": comp, **models}
        calls = {k: (lambda f: lambda xs: f(*xs))(f) for k, f in fns.items()}
        with torch.no_grad():
            raw = time_interleaved(calls, lambda n, i: inputs, trials=60, warmup=5)
        timing = {k: {"event_ms": statistics.median(t), "wall_ms": statistics.median(w)} for k, (t, w) in raw.items()}
        host = {k: host_rate(f, inputs) for k, f in fns.items()}
        wall, kern = kernel_times(models["B"], inputs, 20)
        bd = {tag: breakdown(src, init, sd, inputs) for tag, src in (("A", srcA), ("B", srcB))}
        results[stem] = {"max_abs_err": errs, "timing": timing, "host_us": host, "kernel_ms_B": sum(kern.values()),
                         "breakdown": bd, "setup_s": t_compiled, "s": time.time() - t_start}
        r = results[stem]
        print(f"\n## {stem} ({r['s']:.0f} s) err {errs}")
        for k in fns:
            print(f"  {k:8s} event {timing[k]['event_ms']:7.3f} ms  wall {timing[k]['wall_ms']:7.3f}  host-rate {host[k]:8.0f} us")
        print(f"  B kernels {r['kernel_ms_B']:.3f} ms GPU per call")
        for tag in ("A", "B"):
            print(f"  breakdown {tag}: total {bd[tag]['total_us']:.0f} us: " + ", ".join(
                f"{k} {n}x {us:.0f}" for k, (n, us) in sorted(bd[tag]["by_kind"].items(), key=lambda kv: -kv[1][1])))
        for us, t in bd["B"]["top"][:6]:
            print(f"     {us:7.1f}  {t[:100]}")
    except Exception:
        traceback.print_exc()
        results[stem] = {"error": traceback.format_exc()[-2000:]}
    sys.stdout.flush()
    json.dump(results, open(f"{OUT}/ab.json", "w"), indent=1, default=str)
