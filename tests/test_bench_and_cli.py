"""`drtriton verify` and `drtriton bench` as a user runs them (CPU, interpreter)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from drtriton.bench import BenchEntry, report_markdown, run_bench, summarize
from drtriton.problem import from_source
from drtriton.verify import Verdict
from verifier_cases import HACKS, RELU, RELU_OK, ROW_SUM, ROW_SUM_OK, SOFTMAX

ROOT = Path(__file__).resolve().parents[1]


def drtriton(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "drtriton.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


def test_bench_input_errors_are_one_line_and_exit_2(tmp_path):
    """A missing, malformed or unknown problem set: one clear line, exit code 2, no traceback."""
    (tmp_path / "bad.jsonl").write_text('{"name": "x"}\n')
    (tmp_path / "cands").mkdir()
    for spec, message in ((str(tmp_path / "missing.jsonl"), "cannot read"), (str(tmp_path / "bad.jsonl"), "not a KernelBench row"),
                          ("kernelbench:level9", "no such problem set (shipped: kernelbench:level1, kernelbench:level2)")):
        r = drtriton("bench", spec, "--candidates", str(tmp_path / "cands"), "--out", str(tmp_path / "out"))
        assert r.returncode == 2, r.stderr
        assert message in r.stderr and "Traceback" not in r.stderr, r.stderr
    # --ids that select nothing say so instead of reporting 0/0: a folder has no ids, a set lacks these
    (tmp_path / "problems").mkdir()
    (tmp_path / "problems" / "p.py").write_text(SOFTMAX)
    for spec, ids, message in ((str(tmp_path / "problems"), "1-3", "have no ids"),
                               ("kernelbench:level1", "500-600", "none of kernelbench:level1's problems has these ids")):
        r = drtriton("bench", spec, "--ids", ids, "--candidates", str(tmp_path / "cands"), "--out", str(tmp_path / "out"))
        assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_bench_takes_a_shipped_set_by_name(tmp_path):
    """`kernelbench:level1` from any folder (no sibling folders needed): the set loads and the
    run reports the chosen problem (no candidate for it here, so nothing runs)."""
    (tmp_path / "cands").mkdir()
    r = drtriton("bench", "kernelbench:level1", "--ids", "19", "--candidates", str(tmp_path / "cands"),
                 "--device", "cpu", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 1 and "19_ReLU: no candidate" in r.stderr, r.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["problems"] == 1 and summary["statuses"] == {"missing": 1}


def test_verify_exit_codes_and_json(tmp_path):
    (tmp_path / "ref.py").write_text(RELU)
    (tmp_path / "good.py").write_text(RELU_OK)
    (tmp_path / "bad.py").write_text(HACKS["row6_mutates_input"][1])
    ok = drtriton("verify", "ref.py", "good.py", "--device", "cpu", "--json", "--workers", "1", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    verdict = json.loads(ok.stdout)
    assert verdict["correct"] and verdict["speed_note"] == "not measured (no CUDA device)"
    bad = drtriton("verify", "ref.py", "bad.py", "--device", "cpu", "--workers", "1", cwd=tmp_path)
    assert bad.returncode == 1
    assert "rejected: forward modified its input #0 in place" in bad.stdout
    assert "trial 1/5" not in bad.stdout and "building the reference" in bad.stderr  # progress on stderr
    usage = drtriton("verify", "missing.py", "good.py", cwd=tmp_path)
    assert usage.returncode == 2 and "cannot read missing.py" in usage.stderr
    no_inputs = tmp_path / "noinputs.py"
    no_inputs.write_text("import torch.nn as nn\nclass M(nn.Module):\n    def forward(self, x):\n        return x\n")
    usage = drtriton("verify", "noinputs.py", "good.py", "--class", "M", cwd=tmp_path)
    assert usage.returncode == 2 and "def get_inputs():" in usage.stderr


def test_verify_reports_a_broken_reference_as_a_usage_error(tmp_path):
    (tmp_path / "ref.py").write_text(RELU.replace("return [torch.randn(64, 96)]", "return [torch.randn(64, 96), 3]"))
    (tmp_path / "good.py").write_text(RELU_OK)
    r = drtriton("verify", "ref.py", "good.py", "--device", "cpu", "--workers", "1", cwd=tmp_path)
    assert r.returncode == 2
    assert "get_inputs() returns 2 values but Model.forward takes (x)" in r.stdout


def _three_problems(tmp_path):
    """problems/ with relu, row_sum and softmax; candidates/ with correct modules for the first two."""
    problems, candidates = tmp_path / "problems", tmp_path / "candidates"
    problems.mkdir()
    candidates.mkdir()
    for name, ref, cand in (("relu", RELU, RELU_OK), ("row_sum", ROW_SUM, ROW_SUM_OK), ("softmax", SOFTMAX, None)):
        (problems / f"{name}.py").write_text(ref)
        if cand:
            (candidates / f"{name}.py").write_text(cand)
    return problems, candidates


def test_bench_on_a_folder(tmp_path):
    problems, candidates = _three_problems(tmp_path)
    (candidates / "relu.py").write_text(RELU_OK)
    out = tmp_path / "out"
    r = drtriton("bench", str(problems), "--candidates", str(candidates), "--out", str(out),
                 "--device", "cpu", "--workers", "2")
    assert r.returncode == 0, r.stderr
    assert "2/3 correct" in r.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["correct"] == 2 and summary["statuses"] == {"correct": 2, "missing": 1}
    assert summary["fast_p_eager"]["0.0"] == pytest.approx(2 / 3)
    assert summary["timed_eager"] == 0  # no CUDA: nothing timed, so no fast_1
    rows = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    assert [row["problem"] for row in rows] == ["relu", "row_sum", "softmax"]
    assert "| softmax | missing |" in (out / "report.md").read_text()
    assert (out / "speedups.svg").read_text().startswith("<svg")
    # a mistyped --candidates is a usage error and leaves the earlier run's verdicts alone
    before = (out / "verdicts.jsonl").read_text()
    r = drtriton("bench", str(problems), "--candidates", str(tmp_path / "nowhere"), "--out", str(out), "--device", "cpu")
    assert r.returncode == 2 and "not a folder" in r.stderr
    assert (out / "verdicts.jsonl").read_text() == before


def _entry(name, correct, eager=None, compile_=None, share=None):
    v = Verdict(correct=correct, status="correct" if correct else "incorrect", triton_kernels=["k"],
                triton_share=share, speedup_eager=eager, speedup_compile=compile_)
    return BenchEntry(from_source(RELU, name=name), Path(f"{name}.py"), v)


def test_fast_p_counts_all_problems_and_geomean_only_the_correct():
    entries = [_entry("a", True, 2.5, 1.2), _entry("b", True, 1.2, 0.8), _entry("c", False, 9.0, 9.0),
               BenchEntry(from_source(RELU, name="d"), None, None)]
    s = summarize(entries)
    assert s["fast_p_eager"] == {"0.0": 0.5, "1.0": 0.5, "1.5": 0.25, "2.0": 0.25}
    assert s["fast_p_compile"]["1.0"] == 0.25
    assert s["geomean_speedup_eager"] == pytest.approx((2.5 * 1.2) ** 0.5)
    assert s["statuses"] == {"correct": 2, "incorrect": 1, "missing": 1}


def test_a_plan_with_no_computation_in_triton_is_not_counted_as_a_conversion():
    library_only = _entry("e", True, 3.0, 3.0, share=0.0)  # correct, fast, all cuDNN
    assert "not a conversion" in library_only.verdict.summary
    s = summarize([_entry("a", True, 2.5, 1.2, share=0.4), library_only])
    assert s["correct"] == 1 and s["statuses"] == {"correct": 1, "not converted": 1}
    assert s["fast_p_eager"]["1.0"] == 0.5


def test_fast_p_is_also_given_over_plans_whose_heavy_operators_run_in_triton():
    cudnn = _entry("conv", True, 3.0, 2.0, share=0.3)  # correct and fast, but the conv is cuDNN's
    cudnn.verdict.pytorch_ops = {"convolution.default": 1}
    own = _entry("own", True, 1.5, 0.9, share=0.9)
    own.verdict.pytorch_ops = {"cat.default": 1}  # light PyTorch ops do not disqualify
    assert cudnn.verdict.heavy_ops_in_pytorch == ["convolution.default"] and own.verdict.heavy_ops_in_pytorch == []
    s = summarize([cudnn, own])
    assert s["fast_p_eager"]["2.0"] == 0.5 and s["fast_p_eager_heavy_in_triton"]["2.0"] == 0.0
    assert s["fast_p_eager_heavy_in_triton"] == {"0.0": 0.5, "1.0": 0.5, "1.5": 0.0, "2.0": 0.0}
    assert s["correct_heavy_in_triton"] == 1
    assert "GEMM / conv / attention in Triton" in report_markdown([cudnn, own], s, "t")


def test_id_ranges_and_entries_round_trip():
    from drtriton.cli import UsageError, _id_set

    assert _id_set("1-3,7") == {1, 2, 3, 7}
    with pytest.raises(UsageError, match="ranges like"):
        _id_set("a-b")
    entry = _entry("a", True, 2.0, 1.5)
    again = BenchEntry.from_dict(json.loads(json.dumps(entry.to_dict())))
    assert again.verdict == entry.verdict and again.problem.name == "a"


def test_bench_shows_a_progress_bar_on_a_terminal(tmp_path):
    """On a terminal, bench draws a bar (done/total, the time left, the problem in hand) beside
    its one line per problem; in a pipe (the other tests) only the lines are written."""
    import os
    import pty

    problems, cands = tmp_path / "problems", tmp_path / "cands"
    problems.mkdir()
    cands.mkdir()
    for name in ("relu_a", "relu_b"):
        (problems / f"{name}.py").write_text(RELU)
        (cands / f"{name}.py").write_text(RELU_OK)
    master, slave = pty.openpty()
    import fcntl
    import struct
    import termios

    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a terminal's size
    proc = subprocess.Popen([sys.executable, "-m", "drtriton.cli", "bench", str(problems), "--candidates", str(cands),
                             "--device", "cpu", "--out", str(tmp_path / "out")], stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    proc.wait(timeout=600)
    text = seen.decode(errors="replace")
    assert proc.returncode == 0, text[-2000:]
    assert "[2/2]" in text and "1/2 [" in text and "problem" in text, text[-2000:]


def test_doctor_and_version_report_the_environment():
    r = drtriton("doctor")
    assert r.returncode == 0, r.stderr
    for line in ("drtriton", "torch", "triton", "CUDA device", "TRITON_INTERPRET", "server (editors)", "training"):
        assert line in r.stdout, r.stdout
    import torch
    if not torch.cuda.is_available():
        assert "Triton interpreter" in r.stdout
    v = drtriton("--version")
    assert v.returncode == 0 and v.stdout.startswith("drtriton ")


def test_doctor_names_an_optional_package_that_is_installed_but_broken(tmp_path):
    # a package found on disk that fails to import: what a half-upgraded environment looks like,
    # and what kills the language server at start-up
    shim = tmp_path / "pygls"
    shim.mkdir()
    (shim / "__init__.py").write_text('raise ImportError("pygls is broken on purpose")\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-m", "drtriton.cli", "doctor"], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    [row] = [line for line in r.stdout.splitlines() if line.startswith("server (editors)")]
    assert "NOT USABLE: pygls: ImportError: pygls is broken on purpose" in row
    assert any(line.startswith("training") and "NOT USABLE" not in line for line in r.stdout.splitlines())


def test_bench_auto_verifies_a_candidate_strict_then_mixed_when_pytorch_computes_in_it(tmp_path, cpu_verifier):
    from drtriton.bench import run_bench
    from verifier_cases import LINEAR_RELU_BIAS, LINEAR_RELU_BIAS_MIXED

    (tmp_path / "fusion.py").write_text(LINEAR_RELU_BIAS_MIXED)  # nn.Linear in forward, Triton epilogue
    problem = from_source(LINEAR_RELU_BIAS, name="fusion")
    [strict] = run_bench([problem], tmp_path, cpu_verifier, mode="strict")
    assert strict.verdict.status == "rejected" and "PyTorch computes in forward" in strict.verdict.reasons[0]
    [auto] = run_bench([problem], tmp_path, cpu_verifier, mode="auto")
    assert auto.verdict.correct and auto.verdict.settings["mode"] == "mixed"


# -- several GPUs: problems dealt out to one verifier per GPU ------------------------------------


class _FakeVerifier:
    """Stands for a verifier on one GPU: counts the problems it checks and how many at once."""

    def __init__(self, name: str, workers: int):
        import threading
        from types import SimpleNamespace

        self.name, self.config, self.device = name, SimpleNamespace(workers=workers), "cuda"
        self.seen, self.busy, self.most = [], 0, 0
        self._lock = threading.Lock()

    def verify(self, problem, source, mode=None):
        import time

        from drtriton.verify import Verdict

        with self._lock:
            self.busy += 1
            self.most = max(self.most, self.busy)
            self.seen.append(problem.name)
        time.sleep(0.05)
        with self._lock:
            self.busy -= 1
        return Verdict(correct=True, status="correct", reasons=[self.name])


def test_problems_are_dealt_out_to_every_gpu_each_within_its_workers(tmp_path):
    problems = [from_source(RELU, name=f"p{i}") for i in range(12)]
    for p in problems:
        (tmp_path / f"{p.name}.py").write_text("candidate")
    gpus = [_FakeVerifier("gpu0", 2), _FakeVerifier("gpu1", 2)]
    entries = run_bench(problems, tmp_path, gpus)
    assert [e.problem.name for e in entries] == [p.name for p in problems]  # in problem order
    assert sorted(sum((g.seen for g in gpus), [])) == sorted(p.name for p in problems)  # each once
    assert all(g.seen for g in gpus) and all(g.most <= 2 for g in gpus), [(g.seen, g.most) for g in gpus]
    assert max(g.most for g in gpus) == 2  # both workers of a GPU were used at once


def test_gpus_option_names_visible_gpus_or_says_which_are(monkeypatch):
    from drtriton.verify.gpus import choose_gpus

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert choose_gpus("all") == ["2", "3"] and choose_gpus("3,3") == ["3"]
    with pytest.raises(ValueError, match="visible: 2, 3"):
        choose_gpus("0,1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(ValueError, match="no CUDA device"):
        choose_gpus("all")


def test_processes_sharing_claims_run_each_problem_once(tmp_path):
    from drtriton.bench import Claims

    problems = [from_source(RELU, name=f"p{i}") for i in range(10)]
    for p in problems:
        (tmp_path / f"{p.name}.py").write_text("candidate")
    claims = Claims(tmp_path / "claims")
    shards = [_FakeVerifier("a", 2), _FakeVerifier("b", 2)]
    import threading

    results = {}
    threads = [threading.Thread(target=lambda v=v: results.setdefault(v.name, run_bench(problems, tmp_path, v,
                                                                                       claims=claims)))
               for v in shards]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    names = [e.problem.name for entries in results.values() for e in entries]
    assert sorted(names) == sorted(p.name for p in problems)  # every problem, once, by one shard
    assert len(list((tmp_path / "claims").iterdir())) == 10
    again = [from_source(RELU, name=p.name) for p in problems[:3]]  # the same problems in another list
    assert not run_bench(again, tmp_path, _FakeVerifier("c", 2), claims=claims)
    assert not run_bench(problems, tmp_path, _FakeVerifier("late", 2), claims=claims)  # nothing left


def test_bench_shards_sharing_claims_run_each_problem_once_and_merge(tmp_path):
    """The cluster path on one node: two `drtriton bench --claims` processes (array jobs would be
    the same command) split a set between them; merge_bench.py makes one report of their folders."""
    problems, candidates = _three_problems(tmp_path)
    shards = [subprocess.Popen([sys.executable, "-m", "drtriton.cli", "bench", str(problems), "--candidates",
                                str(candidates), "--claims", str(tmp_path / "claims"), "--out", str(tmp_path / f"job{i}"),
                                "--device", "cpu", "--workers", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True) for i in range(2)]
    for p in shards:
        p.communicate(timeout=600)
        assert p.returncode in (0, 1)  # 1: a shard that got no correct candidate
    ran = [json.loads(line)["problem"] for i in range(2)
           for line in (tmp_path / f"job{i}" / "verdicts.jsonl").read_text().splitlines()]
    assert sorted(ran) == ["relu", "row_sum", "softmax"]  # each problem by exactly one shard
    merge = [sys.executable, str(ROOT / "benchmarks" / "merge_bench.py"), "--claims", str(tmp_path / "claims"),
             "--out", str(tmp_path / "merged")]
    r = subprocess.run(merge + [str(tmp_path / "job0"), str(tmp_path / "job1")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert summary["problems"] == 3 and summary["correct"] == 2
    # a job that stopped after claiming: its problem counts as missing, not as absent
    (tmp_path / "claims" / "x-late.claim").write_text(json.dumps({"problem": "late", "origin": "x", "host": "h",
                                                                    "pid": 1}))
    r = subprocess.run(merge + [str(tmp_path / "job0"), str(tmp_path / "job1")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and "missing: late" in r.stderr
    summary = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert summary["problems"] == 4 and summary["statuses"]["missing"] == 2
    r = subprocess.run(merge + [str(tmp_path / "job0"), str(tmp_path / "nojob")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode != 0 and "no verdicts.jsonl" in r.stderr  # a folder that never ran: an error
