"""The verifier on CPU (Triton interpreter): honest kernels pass, every listed cheat fails for
the right reason, and faults give failed verdicts without spoiling the next one."""

import pytest
import torch

from drtriton.problem import from_source
from drtriton.verify import Verdict
from verifier_cases import CENTERED_MEAN, CENTERED_MEAN_F64, BATCHNORM_DROPOUT, BATCHNORM_EVAL_OK, HACKS, HONEST, LINEAR_RELU_BIAS, LINEAR_RELU_BIAS_MIXED, RELU, RELU_KERNEL, RELU_OK, relu_candidate, src, LAUNCH, WILD_STORE_KERNEL


def problem(source, name="p"):
    return from_source(source, name=name)


@pytest.mark.parametrize("kind", sorted(HONEST))
def test_honest_candidates_are_correct(cpu_verifier, kind):
    ref, cand = HONEST[kind]
    v = cpu_verifier.verify(problem(ref, kind), cand)
    assert v.correct, v.reasons
    assert v.status == "correct"
    assert len(v.trials) == 8 and all(t.passed for t in v.trials)
    assert [t.phase for t in v.trials].count("other_shapes") == 1  # another batch size
    assert len(v.shapes_checked) == 2, v.shapes_checked
    assert v.triton_kernels
    assert v.pytorch_ops == {}
    assert v.speed_note == "not measured (no CUDA device)"
    assert v.timings is None and v.speedup_eager is None


@pytest.mark.parametrize("name", sorted(HACKS))
def test_each_reward_hack_is_refused_for_its_reason(cpu_verifier, name):
    ref, cand, status, reason = HACKS[name]
    v = cpu_verifier.verify(problem(ref, name), cand)
    assert not v.correct
    statuses = status if isinstance(status, tuple) else (status,)
    assert v.status in statuses, (v.status, v.reasons)
    assert reason.lower() in " ".join(v.reasons).lower(), v.reasons


def test_mixed_mode_accepts_pytorch_ops_and_reports_them():
    from drtriton.verify import Verifier, VerifyConfig

    with Verifier(VerifyConfig(device="cpu", mode="mixed", workers=1)) as ver:
        v = ver.verify(problem(LINEAR_RELU_BIAS), LINEAR_RELU_BIAS_MIXED)
    assert v.correct, v.reasons
    assert any(op.startswith("addmm") or op.startswith("mm") for op in v.pytorch_ops), v.pytorch_ops
    assert v.settings["parameters"] == "state_dict"


def test_a_stochastic_module_is_verified_in_eval_mode_from_its_constructed_state(cpu_verifier):
    v = cpu_verifier.verify(problem(BATCHNORM_DROPOUT, "batchnorm dropout"), BATCHNORM_EVAL_OK)
    assert "stochastic in training mode (dropout?): verified in eval mode" in v.flags
    assert v.correct, v.reasons


def test_reference_out_of_memory_once_is_retried(cpu_verifier, tmp_path):
    """A reference that runs out of GPU memory (other problems' tensors held by the reference
    worker, other checks' workers) is prepared again after the worker dropped its other
    problems: the verdict is about the candidate, not about a crowded GPU."""
    marker = tmp_path / "ran-out-once"
    source = RELU.replace("def get_inputs():\n", f"""def get_inputs():
    import pathlib
    if not pathlib.Path({str(marker)!r}).exists():
        pathlib.Path({str(marker)!r}).touch()
        raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
""")
    v = cpu_verifier.verify(problem(source, "oom once"), RELU_OK)
    assert marker.exists()
    assert v.correct, v.reasons


def test_a_trial_whose_reference_outputs_were_lost_runs_again(monkeypatch):
    """Another problem broke the reference worker's CUDA context (a device-side assert) while
    this check waited to compare: the replaced worker has no outputs for the trial. The trial
    runs again on new inputs; the verdict is about the candidate."""
    from drtriton.verify import Verifier, VerifyConfig
    from drtriton.verify import verifier as verifier_module

    killed = []
    real_call = verifier_module._Check.reference_call

    def call(self, request, timeout=None):
        if request["op"] == "compare" and not killed:
            with self.pool.reference() as ref:
                ref.kill("a device-side assert in another problem (simulated)")
            killed.append(request["seed"])
        return real_call(self, request, timeout)

    monkeypatch.setattr(verifier_module._Check, "reference_call", call)
    with Verifier(VerifyConfig(device="cpu", workers=1, timeout_s=60)) as ver:
        v = ver.verify(problem(RELU, "lost"), RELU_OK)
    assert killed and v.correct, v.reasons


def test_verdict_round_trips_through_json(cpu_verifier):
    v = cpu_verifier.verify(problem(RELU), RELU_OK)
    again = Verdict.from_dict(__import__("json").loads(v.to_json()))
    assert again == v
    assert "correct on 7/7 trials" in again.summary


FAULTS = {
    "exception": ("raise RuntimeError('boom')\n", "failed", "boom"),
    "hang": ("while True:\n    pass\n", "failed", "timed out"),
    "exit": ("raise SystemExit(3)\n", "failed", "exited with code 3"),
    "segfault": ("wild_store_kernel[(1,)](x)\n", "failed", "crashed (SIGSEGV)"),
    "huge_allocation": ("torch.empty(1 << 50)\n", "failed", ""),
    "memory_growth": ("keep = [torch.ones(1 << 27) for _ in range(64)]\n", "failed", "memory"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_faults_give_failed_verdicts_and_the_next_verdict_is_right(fault):
    from drtriton.verify import Verifier, VerifyConfig

    body, status, reason = FAULTS[fault]
    cand = relu_candidate(body + "out = torch.empty_like(x)\nn = x.numel()\n" + LAUNCH + "return out\n",
                          extra=WILD_STORE_KERNEL)
    with Verifier(VerifyConfig(device="cpu", workers=1, timeout_s=10, memory_limit_mb=4096)) as ver:
        v = ver.verify(problem(RELU), cand)
        assert v.status == status, (v.status, v.reasons)
        assert not v.correct
        assert reason in " ".join(v.reasons), v.reasons
        after = ver.verify(problem(RELU), RELU_OK)
        assert after.correct, after.reasons


def test_a_load_that_takes_too_long_fails_within_the_load_timeout():
    """RL rewards allow a candidate's load (which compiles its kernels ahead) less than the
    verifier's 900 s for whole networks: one rollout's 123 s compile held its whole step."""
    import time

    from drtriton.verify import Verifier, VerifyConfig

    slow_import = relu_candidate("out = torch.empty_like(x)\nn = x.numel()\n" + LAUNCH + "return out\n",
                                 extra="while True:\n    pass\n")
    with Verifier(VerifyConfig(device="cpu", workers=1, load_timeout_s=3)) as ver:
        started = time.monotonic()
        v = ver.verify(problem(RELU), slow_import)
        assert v.status == "failed" and "timed out" in " ".join(v.reasons), v.reasons
        assert time.monotonic() - started < 30
        assert ver.verify(problem(RELU), RELU_OK).correct


def test_a_large_problem_is_checked_again_with_the_gpu_memory_to_itself(monkeypatch):
    """On a GPU, a problem whose inputs and outputs pass ALONE_BYTES (or that ran out of memory
    beside other checks) is checked again holding the memory lock alone: the verdict is about
    the candidate, not a crowded GPU. Shown on CPU workers with the GPU-only parts stubbed."""
    from drtriton.verify import Verifier, VerifyConfig
    from drtriton.verify import verifier as verifier_module

    monkeypatch.setattr(verifier_module, "ALONE_BYTES", 1)  # every problem is "large"
    monkeypatch.setattr(verifier_module.Verifier, "cuda", property(lambda self: True))
    monkeypatch.setattr(verifier_module._Check, "time", lambda self, prep: None)  # no CUDA timing
    held = []
    real_memory = verifier_module.Verifier._memory
    monkeypatch.setattr(verifier_module.Verifier, "_memory",
                        lambda self, alone: held.append(alone) or real_memory(self, alone))
    messages = []
    with Verifier(VerifyConfig(device="cpu", workers=1)) as ver:
        v = ver.verify(problem(RELU, "large"), RELU_OK, progress=messages.append)
        assert v.correct, v.reasons
        assert v.settings["gpu_memory"] == "alone"
        assert held == [False, True], held  # first shared, then alone
        assert "checking again with the GPU's memory to itself" in messages
        again = ver.verify(problem(RELU, "large"), RELU_OK)  # remembered: alone from the start
        assert again.correct and held == [False, True, True], held


def test_gpu_lock_lets_a_waiting_exclusive_request_go_before_new_shared_ones(tmp_path):
    """Checks hold the memory lock shared for their whole length; with flock alone a large
    problem's exclusive request could wait for as long as checks keep overlapping."""
    import threading
    import time

    from drtriton.verify.pool import GpuLock

    lock, order = GpuLock(str(tmp_path), "test.lock"), []
    first_in, release_first = threading.Event(), threading.Event()

    def first():
        with lock.shared():
            first_in.set()
            release_first.wait(10)
            order.append("first out")  # inside: the exclusive holder cannot be in yet

    def exclusive():
        with lock.exclusive():
            order.append("exclusive")

    def late_shared():
        with lock.shared():
            order.append("late shared")

    threads = [threading.Thread(target=first)]
    threads[0].start()
    first_in.wait(10)
    threads.append(threading.Thread(target=exclusive))
    threads[1].start()
    time.sleep(0.3)  # the exclusive request is waiting for the first holder
    threads.append(threading.Thread(target=late_shared))
    threads[2].start()
    time.sleep(0.3)
    assert order == []  # the late shared request queues behind the exclusive one
    release_first.set()
    for t in threads:
        t.join(10)
    assert order == ["first out", "exclusive", "late shared"], order


def test_gpu_lock_order_holds_across_processes(tmp_path):
    """Several training runs on one GPU are separate processes: a run's exclusive timing
    request must go before another run's new shared holders too, not only its own threads'."""
    import os
    import subprocess
    import sys
    import time

    from drtriton.verify.pool import GpuLock

    log = tmp_path / "order.txt"
    child = ("import sys; from drtriton.verify.pool import GpuLock\n"
             "lock = GpuLock(sys.argv[1], 'test.lock')\n"
             "with getattr(lock, sys.argv[2])():\n"
             "    open(sys.argv[3], 'a').write(sys.argv[2] + '\\n')\n")
    lock = GpuLock(str(tmp_path), "test.lock")

    def flocks_on_turnstile(waiting: bool) -> bool:
        """/proc/locks lists the turnstile's holders ("N: FLOCK ...") and, after "->", its waiters."""
        inode = f":{os.stat(lock.turnstile).st_ino} "
        return any(inode in line and ("->" in line) == waiting for line in open("/proc/locks"))

    def until(condition) -> None:
        deadline = time.monotonic() + 30
        while not condition():
            assert time.monotonic() < deadline, open("/proc/locks").read()
            time.sleep(0.05)

    children = []
    try:
        with lock.shared():
            children.append(subprocess.Popen([sys.executable, "-c", child, str(tmp_path), "exclusive", str(log)]))
            until(lambda: flocks_on_turnstile(waiting=False))  # it holds the turnstile, waiting for the lock
            children.append(subprocess.Popen([sys.executable, "-c", child, str(tmp_path), "shared", str(log)]))
            until(lambda: flocks_on_turnstile(waiting=True))  # the late shared request waits at the turnstile
            time.sleep(0.2)
            assert not log.exists()  # neither got in while this process holds it shared
        assert [c.wait(30) for c in children] == [0, 0]
        assert log.read_text().split() == ["exclusive", "shared"]
    finally:
        for c in children:
            c.kill()


def test_reference_worker_keeps_the_problems_in_use():
    """The reference worker keeps a few built problems, least recently used evicted first: a
    problem being checked stays while other searches prepare theirs (a bench's concurrent
    searches evicted one mid-check before), and an evicted one answers 'unprepared' (the
    verifier then prepares it again)."""
    from drtriton.verify.worker.harness import ReferenceHarness

    harness = ReferenceHarness({"device": "cpu"})
    harness.MAX_PROBLEMS = 2
    harness.op_reference = lambda req: {"ok": True, "key": req["key"]}
    harness._keep("a", object())
    harness._keep("b", object())
    assert harness.handle({"op": "reference", "key": "a"})["ok"]  # a used: b is now the oldest
    harness._keep("c", object())
    assert list(harness.problems) == ["a", "c"]
    assert harness.handle({"op": "reference", "key": "b"})["kind"] == "unprepared"


def test_timing_tunes_autotuned_kernels_again(tmp_path):
    """Correctness trials autotune beside other checks on the GPU; before timing (GPU held
    alone) the candidate's autotuner choices are forgotten, so the warmup tunes again."""
    pytest.importorskip("triton")
    from drtriton.verify.worker.harness import forget_autotuning
    from drtriton.verify.worker.runtime import import_source

    module = import_source('''
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])
@triton.jit
def tuned(x_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.heuristics({"EVEN": lambda args: args["n"] % 2 == 0})
@triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n"])
@triton.jit
def nested(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    pass


@triton.jit
def plain(x_ptr):
    pass
''', "autotuned_case", str(tmp_path))
    module.tuned.cache[(1024,)] = module.tuned.configs[1]
    module.nested.fn.cache[(1024,)] = module.nested.fn.configs[0]
    assert forget_autotuning(module) == {"tuned": ["BLOCK"], "nested": ["BLOCK"]}
    assert module.tuned.cache == {} and module.nested.fn.cache == {}
    assert forget_autotuning(None) == {}
    # the built-in policy's modules launch through _DirectLaunch, which keeps the compiled
    # kernel of each choice: cleared as well, or it would go on launching the old choice
    from drtriton.policy.launch import DirectLaunch

    module.launched = DirectLaunch(module.tuned)
    module.launched.launches[(1, 1024)] = ("kept",)
    module.tuned.cache[(1024,)] = module.tuned.configs[1]
    assert set(forget_autotuning(module)) == {"tuned", "nested"}
    assert module.launched.launches == {} and module.tuned.cache == {}


@pytest.mark.parametrize("retune", [True, False])
def test_timing_tunes_again_unless_the_config_says_not_to(retune):
    """Timing re-tunes autotuned kernels with the GPU held alone (the default, every check); RL
    rewards turn it off (re-tuning every rollout's kernels alone made steps wait), timing the
    configuration the trials chose."""
    import contextlib
    from types import SimpleNamespace

    from drtriton.verify.verifier import VerifyConfig, _Check

    requests = []
    timing = {"median_ms": 1.0, "p25_ms": 1.0, "p75_ms": 1.0, "min_ms": 1.0, "mean_ms": 1.0, "trials": 3}

    def candidate_call(request, timeout=None):
        requests.append(request)
        return {"timings": {"candidate": timing, "eager": timing}, "bandwidth_bytes_per_ms": 1.0,
                "replay_ms": [], "checks": []}

    check = SimpleNamespace(config=VerifyConfig(retune_before_timing=retune), quick=True, launches=[],
                            sizes_follow_data=False, candidate_call=candidate_call,
                            check_timed_outputs=lambda checks, trials: None,
                            verifier=SimpleNamespace(gpu=SimpleNamespace(exclusive=contextlib.nullcontext)))
    _Check.measure(check, floor_bytes=0, input_bytes=4)
    assert requests[0]["retune"] is retune and requests[0]["compile"] is False  # quick: eager only
    assert VerifyConfig().retune_before_timing  # everything but RL rewards tunes again


def test_a_near_miss_against_an_fp32_reference_below_its_resolution_goes_to_float64(cpu_verifier):
    """The exact answer is 0 and the fp32 reference is noise: the candidate (float64 sums) is
    judged against the reference run in float64, and the trials say so."""
    v = cpu_verifier.verify(problem(CENTERED_MEAN, "centered mean"), CENTERED_MEAN_F64)
    assert v.correct, v.reasons
    assert any("float64" in t.note for t in v.trials), [t.note for t in v.trials]
    other = [t for t in v.trials if t.phase == "other_shapes"]  # the float64 run takes those shapes too
    assert len(other) == 1 and other[0].passed and "float64" in other[0].note, other


def test_the_float64_arbiter_declines_a_reference_that_draws_random_numbers(tmp_path):
    from drtriton.problem import from_source
    from drtriton.verify.worker.harness import ReferenceHarness

    noisy = CENTERED_MEAN.replace("return (x - x.mean(dim=1, keepdim=True)).mean(dim=1)",
                                  "return x.mean(dim=1) + 0 * torch.rand(())")
    harness = ReferenceHarness({"device": "cpu", "scratch": str(tmp_path)})
    for key, source in (("steady", CENTERED_MEAN), ("noisy", noisy)):
        reply = harness.op_prepare({"key": key, "problem": from_source(source, name=key).to_dict(),
                                    "device": "cpu", "init_seed": 1, "training": False, "probe_seed": 2})
        assert reply["ok"], reply
    exact, why = harness._exact_outputs("steady", 3, 1)
    assert exact is not None and exact[0].dtype == torch.float64 and why == ""
    assert harness._exact_outputs("noisy", 3, 1) == (None, "the reference draws random numbers")
    py_random = noisy.replace("0 * torch.rand(())", "0 * __import__('random').random()")
    harness.op_prepare({"key": "py", "problem": from_source(py_random, name="py").to_dict(),
                        "device": "cpu", "init_seed": 1, "training": False, "probe_seed": 2})
    assert harness._exact_outputs("py", 3, 1)[0] is None
    assert harness._exact_outputs("steady", 3, 2)[0] is None  # not the outputs the trial had


def test_the_arbiters_runs_on_moved_inputs_come_in_float64_and_in_the_references_fp32(tmp_path):
    """`_exact_outputs(perturb=k)` moves each input a few fp32 ulps; with `double=False` the
    reference runs in its own fp32 on those inputs (what fp32's rounding decides there)."""
    from drtriton.problem import from_source
    from drtriton.verify.worker.harness import ReferenceHarness

    harness = ReferenceHarness({"device": "cpu", "scratch": str(tmp_path)})
    reply = harness.op_prepare({"key": "m", "problem": from_source(CENTERED_MEAN, name="m").to_dict(),
                                "device": "cpu", "init_seed": 1, "training": False, "probe_seed": 2})
    assert reply["ok"], reply
    exact = harness._exact_outputs("m", 3, 1)[0][0]
    up64 = harness._exact_outputs("m", 3, 1, perturb=1)[0][0]
    up32, why = harness._exact_outputs("m", 3, 1, perturb=1, double=False)
    assert why == "" and up64.dtype == torch.float64 and up32[0].dtype == torch.float32
    assert 0 < float((up64 - exact).abs().max()) < 1e-4
    assert not torch.equal(up32[0].double(), exact) and float((up32[0].double() - exact).abs().max()) < 1e-4


def test_an_arbiter_out_of_memory_keeps_the_fp32_result_with_a_note(tmp_path, monkeypatch):
    """Running out of memory in the float64 run is no verdict on the candidate and no crash of
    the comparison: the fp32 result stands and says why it was not arbitrated."""
    from drtriton.problem import from_source
    from drtriton.verify.compare import compare
    from drtriton.verify.verdict import Tolerance
    from drtriton.verify.worker import harness as h

    harness = h.ReferenceHarness({"device": "cpu", "scratch": str(tmp_path)})
    harness.op_prepare({"key": "k", "problem": from_source(CENTERED_MEAN, name="k").to_dict(),
                        "device": "cpu", "init_seed": 1, "training": False, "probe_seed": 2})

    def oom(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(h, "compare_with_exact", oom)
    ref = torch.randn(8)
    out = ref.clone()
    out[0] += 1e-2
    tol = Tolerance.for_dtype("torch.float32")
    first = compare(out, ref, tol)
    assert not first.passed
    results = harness._arbitrate("k", 3, [out], [ref], [tol], [first], [0])
    assert not results[0].passed and "no float64 arbiter (out of memory)" in results[0].note


EVAL_BLOCK = src("""
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
        self.net[1].running_mean.fill_(0.5)
        self.net.eval()  # the user's choice: inference statistics

    def forward(self, x):
        return self.net(x)

def get_inputs():
    return [torch.randn(8, 4)]

def get_init_inputs():
    return []
""")

EVAL_BLOCK_CANDIDATE = src("""
@triton.jit
def affine_kernel(y_ptr, scale_ptr, shift_ptr, out_ptr, n, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(y_ptr + offs, mask=mask)
    c = offs % N
    out = y * tl.load(scale_ptr + c, mask=mask) + tl.load(shift_ptr + c, mask=mask)
    tl.store(out_ptr + offs, out, mask=mask)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))

    def forward(self, x):
        lin, bn = self.net[0], self.net[1]
        y = (x @ lin.weight.t() + lin.bias).contiguous()
        scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)  # eval mode: running statistics
        shift = bn.bias - bn.running_mean * scale
        out = torch.empty_like(y)
        affine_kernel[(triton.cdiv(y.numel(), 256),)](y, scale.contiguous(), shift.contiguous(), out,
                                                      y.numel(), y.shape[1], BLOCK=256)
        return out
""")


def test_modules_are_verified_in_the_modes_their_constructor_left():
    # KernelBench's convention is to run a module as constructed: a block put in eval mode by
    # __init__ stays in eval mode (running statistics), instead of being forced into training
    # mode; forcing a mode (training=True) is still possible and changes the answer
    from drtriton.verify import Verifier, VerifyConfig

    with Verifier(VerifyConfig(device="cpu", mode="mixed", workers=1)) as ver:
        v = ver.verify(problem(EVAL_BLOCK, "eval block"), EVAL_BLOCK_CANDIDATE)
    assert v.correct, v.reasons
    assert v.settings["training"] is None
    with Verifier(VerifyConfig(device="cpu", mode="mixed", workers=1, training=True)) as ver:
        forced = ver.verify(problem(EVAL_BLOCK, "eval block"), EVAL_BLOCK_CANDIDATE)
    assert not forced.correct and forced.status == "incorrect", forced.reasons


def test_the_first_call_has_time_to_compile_every_kernel(monkeypatch):
    # a whole network's first call compiles and tunes dozens of kernel configurations: the step
    # limit of the calls that compile (the first, the first at other shapes) grows with the
    # configurations the source defines; the other calls keep the plain limit
    import drtriton.verify.verifier as verifier_module
    from drtriton.verify import Verifier, VerifyConfig

    limits = []
    real_call = verifier_module._Check.candidate_call

    def recording_call(self, request, timeout=None):
        if request["op"] == "run":
            limits.append((request["other_shapes"], timeout))
        return real_call(self, request, timeout)

    monkeypatch.setattr(verifier_module._Check, "candidate_call", recording_call)
    two_kernels = relu_candidate("out = torch.empty_like(x)\nn = x.numel()\n" + LAUNCH + "return out\n",
                                 extra=WILD_STORE_KERNEL)
    with Verifier(VerifyConfig(device="cpu", workers=1, timeout_s=20)) as ver:
        v = ver.verify(problem(RELU), two_kernels)
    assert v.correct, v.reasons
    allowance = 2 * verifier_module.COMPILE_S_PER_CONFIG
    assert limits[0] == (False, 20 + allowance)
    assert (True, 20 + allowance) in limits  # the second input configuration
    assert all(t == 20 for other, t in limits[1:] if not other)


# x[mask]: the reference's output size follows the input values, so a candidate's sizes and grids
# do too (compaction: each kept element's place from a cumsum, the count read back). Its launches
# are then compared by kernel and order only; a candidate whose kernels follow the call count is
# still refused.
MASKED_ROWS = src("""
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x[x > 0.5])

def get_inputs():
    return [torch.randn(16, 24)]

def get_init_inputs():
    return []
""")

_MASKED_FORWARD = """
        kept = x[x > 0.5]  # PyTorch (mixed mode); the kernel's size and grid follow the count
        out = torch.empty_like(kept)
        n = kept.numel()
        {kernel}[(triton.cdiv(n, 128),)](kept, out, n, BLOCK=128)
        return out
"""


def _masked_candidate(kernel: str, extra: str = "") -> str:
    twin = RELU_KERNEL.replace("relu_kernel", "relu_twin_kernel")
    return relu_candidate(_MASKED_FORWARD.format(kernel=kernel), extra=extra, kernel=RELU_KERNEL + twin)


# the same inside forward, with an output of one fixed shape: the verifier asks the problem itself
# (a forward on fake tensors) rather than the outputs' shapes
MASKED_SUM = MASKED_ROWS.replace("return torch.relu(x[x > 0.5])", "return torch.relu(x[x > 0.5]).sum()")


def test_sizes_inside_forward_may_follow_the_data_too():
    from drtriton.verify import Verifier, VerifyConfig

    with Verifier(VerifyConfig(device="cpu", mode="mixed", workers=1)) as ver:
        honest = ver.verify(problem(MASKED_SUM, "masked sum"),
                            _masked_candidate("relu_kernel").replace("        return out\n", "        return out.sum()\n"))
    assert honest.correct, honest.reasons


def test_launches_may_follow_data_dependent_sizes_but_not_the_call_count():
    from drtriton.verify import Verifier, VerifyConfig

    with Verifier(VerifyConfig(device="cpu", mode="mixed", workers=1)) as ver:
        honest = ver.verify(problem(MASKED_ROWS, "masked"), _masked_candidate("relu_kernel"))
        alternating = ver.verify(problem(MASKED_ROWS, "masked"), _masked_candidate(
            "(relu_kernel if len(_CALLS) % 2 else relu_twin_kernel)", extra="_CALLS = []\n").replace(
            "        out = torch.empty_like(kept)", "        _CALLS.append(1)\n        out = torch.empty_like(kept)"))
    assert honest.correct, honest.reasons
    assert any("launches compared by kernel" in f for f in honest.flags), honest.flags
    assert not alternating.correct
    assert "launches changed between calls" in " ".join(alternating.reasons), alternating.reasons


ROUTER = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """A router's choice between two scores that tie to within an fp32 ulp, and one between two
    far apart; no float64 kernel, as CUDA's grouped_mm (a mixture of experts' reference)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor([3.0, 1.0 + 2.0 ** -23, 1.0, 0.5]))

    def forward(self, ids):
        if self.w.dtype == torch.float64:
            raise RuntimeError("no float64 kernel")
        tie = (self.w[1:3].argmax() == 0).float()
        clear = (self.w[[0, 3]].argmax() == 0).float()
        return torch.stack([tie, clear]) * ids.float().sum()


def get_inputs():
    return [torch.randint(1, 5, (3,))]


def get_init_inputs():
    return []
'''


def test_without_a_float64_run_a_choice_a_few_ulps_of_the_weights_decide_is_judged_by_fp32_runs(tmp_path):
    """Token ids cannot be moved and the reference has no float64 run: the arbiter moves the
    parameters instead and runs the reference in its own fp32. A flipped near tie is excused (a
    few ulps of the weights flip it too); a flipped clear choice is not."""
    from drtriton.problem import from_source
    from drtriton.verify.compare import compare
    from drtriton.verify.verdict import Tolerance
    from drtriton.verify.worker.harness import NO_FLOAT64, ReferenceHarness

    harness = ReferenceHarness({"device": "cpu", "scratch": str(tmp_path)})
    reply = harness.op_prepare({"key": "r", "problem": from_source(ROUTER, name="r").to_dict(),
                                "device": "cpu", "init_seed": 1, "training": False, "probe_seed": 2})
    assert reply["ok"], reply
    exact, why = harness._exact_outputs("r", 3, 1)
    assert exact is None and why.startswith(NO_FLOAT64), why
    (ref,), _ = harness._exact_outputs("r", 3, 1, double=False)
    moved = [harness._exact_outputs("r", 3, 1, perturb=k, double=False)[0][0] for k in (1, 2, 3, 4)]
    assert any(m[0] != ref[0] for m in moved) and all(m[1] == ref[1] for m in moved)  # the weights moved
    tol = Tolerance.for_dtype("torch.float32")
    for flipped, excused in ((0, True), (1, False)):
        out = ref.clone()
        out[flipped] = 0.0
        first = compare(out, ref, tol)
        assert not first.passed
        (judged,) = harness._arbitrate("r", 3, [out], [ref], [tol], [first], [0])
        assert judged.passed is excused, judged.note
        assert "judged by the reference's fp32 runs on inputs and parameters a few ulps away" in judged.note, judged.note


def test_without_a_float64_run_the_fp32_runs_judge_only_where_a_fresh_run_is_the_reference(tmp_path):
    """A forward that changes its own state: a fresh fp32 run is not the reference the trial
    compared against, so no run judges, and the fp32 result stands with a note."""
    from drtriton.problem import from_source
    from drtriton.verify.compare import compare
    from drtriton.verify.verdict import Tolerance
    from drtriton.verify.worker.harness import ReferenceHarness

    harness = ReferenceHarness({"device": "cpu", "scratch": str(tmp_path)})
    harness.op_prepare({"key": "r", "problem": from_source(ROUTER, name="r").to_dict(),
                        "device": "cpu", "init_seed": 1, "training": False, "probe_seed": 2})
    (fresh,), _ = harness._exact_outputs("r", 3, 1, double=False)
    ref = fresh + 1.0  # what the live module returned after calls before (its state moved on)
    out = ref.clone()
    out[0] = 0.0
    tol = Tolerance.for_dtype("torch.float32")
    (judged,) = harness._arbitrate("r", 3, [out], [ref], [tol], [compare(out, ref, tol)], [0])
    assert not judged.passed and "no faithful fp32 run" in judged.note, judged.note
