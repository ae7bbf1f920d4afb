"""Session 25 call 2: what a launch costs on the GPU host, and which launches go Triton's way."""
import cProfile, importlib.util, io, os, pstats, statistics, sys, time, timeit
sys.path.insert(0, os.getcwd())
import torch, triton, triton.language as tl
from drtriton.policy.launch import DirectLaunch
from drtriton.problem import load_file

HERE = os.path.dirname(os.path.abspath(__file__))


@triton.jit
def add_kernel(x_ptr, y_ptr, o_ptr, n, s1, s2, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(o_ptr + i, tl.load(x_ptr + i, mask=m) + tl.load(y_ptr + i, mask=m), mask=m)


def t(stmt, g, n=5000):
    torch.cuda.synchronize()
    r = min(timeit.repeat(stmt, number=n, repeat=5, globals=g))
    torch.cuda.synchronize()
    print(f"  {r/n*1e6:7.2f} us  {stmt[:110]}")


x = torch.randn(4096, device="cuda"); y = torch.randn(4096, device="cuda"); o = torch.empty_like(x)
dl = DirectLaunch(add_kernel)
_cdiv = triton.cdiv
for _ in range(3):
    dl[(4,)](x, y, o, 4096, 8, 32, BLOCK=1024, WIDE=False)
key = dl.signature((x, y, o, 4096, 8, 32), {"BLOCK": 1024, "WIDE": False})
entry = dl.launches[key]
device, cur_dev, cur_stream, compiled, run, function, metadata, tail, names = entry
stream = cur_stream(device)
launcher = run
g = dict(globals())
try:
    from torch._C._dynamo.guards import _empty_strided_cuda
    g["_esc"] = _empty_strided_cuda
except Exception as e:
    print("no _empty_strided_cuda", e)
print("## one launch, 6 arguments (3 tensors), H200 host")
t("add_kernel[(4,)](x, y, o, 4096, 8, 32, BLOCK=1024, WIDE=False)", g)
t("dl[(4,)](x, y, o, 4096, 8, 32, BLOCK=1024, WIDE=False)", g)
t("dl.signature((x, y, o, 4096, 8, 32), {'BLOCK': 1024, 'WIDE': False})", g)
t("run(4, 1, 1, stream, function, metadata, None, None, None, x, y, o, 4096, 8, 32, *tail)", g)
print("  launcher attrs:", [a for a in vars(launcher) if not a.startswith("__")])
t("cur_dev()", g); t("cur_stream(device)", g)
t("torch.cuda.current_device()", g)
t("torch._C._cuda_getCurrentRawStream(0)", g)
t("x.data_ptr()", g)
print("## allocation, 4 x 256 x 512 fp32")
g["d"] = x.device
t("torch.empty(4, 256, 512, device=d, dtype=torch.float32)", g)
t("torch.empty(4, 256, 512, device=x.device, dtype=torch.float32)", g)
t("torch.empty((4, 256, 512), device=d, dtype=torch.float32)", g)
t("torch.empty_strided((4, 256, 512), (131072, 512, 1), device=d, dtype=torch.float32)", g)
t("x.new_empty((4, 256, 512))", g)
if "_esc" in g:
    t("_esc((4, 256, 512), (131072, 512, 1), torch.float32)", g)
print("## views")
g["z"] = torch.empty(4, 256, 512, device="cuda")
t("z.view(4, 256, 8, 64)", g); t("torch.ops.aten.view.default(z, [4, 256, 8, 64])", g)
t("z.transpose(1, 2)", g); t("z.contiguous()", g); t("z.shape[1:]", g); t("z.stride()", g)

# which launches of generated modules go Triton's way, and a profile of their forward
for stem in sys.argv[1:]:
    ns = {}
    exec(load_file(f"docs/results/session24-gpu/problems/{stem}.py").source, ns)
    init = ns["get_init_inputs"]()
    ref = ns["Model"](*init).cuda().eval()
    inputs = [v.cuda() if isinstance(v, torch.Tensor) else v for v in ns["get_inputs"]()]
    path = f"{HERE}/gB/{stem}.py"
    spec = importlib.util.spec_from_file_location(f"B_{stem}", path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    m = mod.ModelNew(*init).cuda().eval(); m.load_state_dict(ref.state_dict(), strict=False)
    with torch.no_grad():
        for _ in range(5):
            m(*inputs)
        torch.cuda.synchronize()
        print(f"\n## {stem}: launch paths after 5 calls")
        for name, v in vars(mod).items():
            if type(v).__name__ == "_DirectLaunch":
                kinds = [("direct" if len(e) == 9 else "triton" if e == () else f"first({len(e)})") for e in v.launches.values()]
                inner = type(v.kernel).__name__
                if any(k != "direct" for k in kinds) or not kinds:
                    print(f"  {name}: {inner} {kinds} jit={v.jit is not None}")
        pr = cProfile.Profile(); pr.enable()
        for _ in range(20):
            m(*inputs)
        pr.disable(); torch.cuda.synchronize()
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18)
    print("\n".join(s.getvalue().split("\n")[4:30]))
