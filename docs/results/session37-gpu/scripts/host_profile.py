"""Session 37, call 1: where a host-bound generated forward's call goes on the GPU host.
For each problem: the strict first plan; back-to-back calls (no sync) and synced calls timed;
a cProfile of 10 synced calls (tottime per function: launches, allocations, PyTorch copies);
the PyTorch ops the forward calls, counted by torch.profiler (CPU side)."""
import cProfile, importlib.util, io, pstats, sys, tempfile, time
from collections import Counter
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
import torch
from benchmarks.kernel_profile import first_plan
from drtriton.problem import load_file

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
for path in map(Path, sys.argv[1:]):
    t0 = time.time()
    ns, cand = first_plan(load_file(path), "strict")
    print(f"\n######## {path.stem}: plan made in {time.time() - t0:.1f} s", flush=True)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(cand.source)
    spec = importlib.util.spec_from_file_location(f"cand_{path.stem}", f.name)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    ref = ns["Model"](*ns["get_init_inputs"]()).cuda()
    new = mod.ModelNew(*ns["get_init_inputs"]()).cuda(); new.load_state_dict(ref.state_dict())
    xs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ns["get_inputs"]()]
    with torch.no_grad():
        for label, fn in (("candidate", new), ("eager", ref)):
            for _ in range(5): fn(*xs)
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(20): fn(*xs)
            host = (time.perf_counter() - t) / 20 * 1e3
            torch.cuda.synchronize()
            total = (time.perf_counter() - t) / 20 * 1e3
            synced = []
            for _ in range(20):
                t = time.perf_counter(); fn(*xs); torch.cuda.synchronize(); synced.append((time.perf_counter() - t) * 1e3)
            synced.sort()
            print(f"{label}: back to back host {host:.2f} ms/call (with the GPU's tail {total:.2f}); synced median {synced[10]:.2f} ms", flush=True)
        pr = cProfile.Profile(); pr.enable()
        for _ in range(10):
            new(*xs); torch.cuda.synchronize()
        pr.disable()
        s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(30); print(s.getvalue()[:6000])
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            new(*xs); torch.cuda.synchronize()
        ops, gpu = Counter(), Counter()
        for e in prof.events():
            if e.device_type.name == "CPU" and e.name.startswith("aten::"):
                ops[e.name] += 1
            elif e.device_type.name == "CUDA":
                gpu[e.name[:60]] += e.device_time_total
        print("aten ops per call:", ops.most_common(25))
        print("GPU us per call, top:", [(k, round(v)) for k, v in gpu.most_common(15)], "total", round(sum(gpu.values())))
    del ref, new; torch.cuda.empty_cache()
