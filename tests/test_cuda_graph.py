"""The CUDA-graph option on the CPU: its clear errors, its records and reports (the capture
and replay themselves are GPU tests in test_verifier_gpu.py)."""

import json

import pytest
import torch

from drtriton.bench import BenchEntry, report_markdown, summarize
from drtriton.cli import format_verdict
from drtriton.cuda_graph import CUDAGraphed, input_signature
from drtriton.problem import from_source
from drtriton.verify import GraphTimings, Timing, Timings, Verdict


def test_inputs_off_cuda_or_with_autograd_get_a_clear_error():
    graphed = CUDAGraphed(torch.nn.Linear(4, 4))
    with pytest.raises(RuntimeError, match="CUDA device"):
        graphed(torch.randn(2, 4))


def test_a_graph_is_kept_per_input_sizes_dtype_device_and_other_arguments():
    a, b = torch.randn(2, 3), torch.randn(2, 3).t().contiguous().t()  # same sizes, other strides
    assert input_signature((a, 1)) == input_signature((b, 1))  # values are copied in: layout free
    assert input_signature((a, 1)) != input_signature((a, 2))
    assert input_signature((a,)) != input_signature((a.double(),))


def _timing(ms: float) -> Timing:
    return Timing.from_samples([ms] * 5)


def _verdict(graph: GraphTimings) -> Verdict:
    return Verdict(correct=True, status="correct", triton_kernels=["k"],
                   timings=Timings(candidate=_timing(2.0), eager=_timing(1.0), compiled=_timing(0.8)),
                   speedup_eager=0.5, speedup_compile=0.4, graph=graph)


def test_graph_timings_round_trip_and_reach_every_report():
    timed = GraphTimings(candidate=_timing(0.25), eager=_timing(1.0), compiled=_timing(0.5))
    v = _verdict(timed)
    assert timed.speedup_eager == 4.0 and timed.speedup_compile == 2.0
    back = Verdict.from_dict(json.loads(v.to_json()))
    assert back.graph == timed and back.graph.speedup_eager == 4.0
    assert "replayed as a CUDA graph 4.00x vs eager" in v.summary
    assert "replayed as a CUDA graph: 0.2500 ms" in format_verdict(v)

    refused = _verdict(GraphTimings(note="not capturable as a CUDA graph: x.item()"))
    assert Verdict.from_dict(json.loads(refused.to_json())).graph.note.startswith("not capturable")
    assert "not capturable" in format_verdict(refused) and "CUDA graph" not in refused.summary

    problem = from_source("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                          "        return x\ndef get_inputs():\n    return [torch.randn(2)]\n", name="p")
    entries = [BenchEntry(problem, None, v), BenchEntry(problem, None, refused)]
    summary = summarize(entries)
    assert summary["graph_asked"] == 2 and summary["graph_timed"] == 1
    assert summary["geomean_speedup_graph_eager"] == pytest.approx(4.0)
    text = report_markdown(entries, summary, "t")
    assert "1 of 2 captured | 4.00x | 2.00x |" in text
    assert "(CUDA graph: 4.00x vs eager, 2.00x vs reduce-overhead)" in text
    assert "(CUDA graph: not capturable" in text


def test_arguments_are_keyed_by_value_and_tensors_in_containers_are_refused():
    x = torch.randn(2, 3)
    assert input_signature((x, [1, 2])) == input_signature((x, [1, 2]))  # a list: by value
    assert input_signature((x, [1, 2])) != input_signature((x, [1, 3]))
    with pytest.raises(TypeError, match="not tensors inside a tuple"):
        input_signature(((x, x),))
