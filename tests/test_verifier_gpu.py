"""The verifier on a CUDA device: honest kernels pass and are timed, cheats fail, faults
(an illegal address on the GPU) give failed verdicts and a fresh worker."""

import pytest

from conftest import has_cuda

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_cuda(), reason="needs a CUDA device")]

from drtriton.problem import from_source  # noqa: E402
from verifier_cases import HACKS, HONEST, MATMUL_LARGE, MATMUL_OK, RELU, RELU_OK, TIMING_HACKS  # noqa: E402


@pytest.fixture(scope="module")
def gpu_verifier():
    from drtriton.verify import Verifier, VerifyConfig

    v = Verifier(VerifyConfig(device="cuda", workers=2, timing_trials=30))
    yield v
    v.close()


@pytest.mark.parametrize("kind", sorted(HONEST))
def test_honest_candidates_are_correct_and_timed(gpu_verifier, kind):
    ref, cand = HONEST[kind]
    v = gpu_verifier.verify(from_source(ref, name=kind), cand)
    assert v.correct, v.reasons
    assert v.timings is not None and v.timings.candidate.median_ms > 0
    assert v.speedup_eager is not None and v.speedup_eager > 0
    assert v.triton_share is not None and v.triton_share > 0.5, v.triton_share
    # where the time goes: the candidate's own kernels are among the heaviest of a call
    assert set(v.kernel_ms) & set(v.triton_kernels) and all(ms > 0 for ms in v.kernel_ms.values()), v.kernel_ms
    assert v.settings.get("compiled_ahead"), v.settings  # every kernel compiled before the first call


@pytest.mark.parametrize("name", sorted(HACKS))
def test_each_reward_hack_is_refused_on_the_gpu(gpu_verifier, name):
    ref, cand, status, reason = HACKS[name]
    v = gpu_verifier.verify(from_source(ref, name=name), cand)
    assert not v.correct, v.summary
    statuses = status if isinstance(status, tuple) else (status,)
    assert v.status in statuses, (v.status, v.reasons)


@pytest.mark.parametrize("name", sorted(TIMING_HACKS))
def test_each_timing_hack_is_refused_for_its_reason(gpu_verifier, name):
    """Cheats that only pay while timed: remembered results (a content-keyed cache), work
    skipped once the calls outnumber the trials' or while the timing's buffers are allocated."""
    ref, cand, status, reason = TIMING_HACKS[name]
    v = gpu_verifier.verify(from_source(ref, name=name), cand)
    assert not v.correct, (v.summary, v.timings)
    statuses = status if isinstance(status, tuple) else (status,)
    assert v.status in statuses, (v.status, v.reasons)
    assert reason in " ".join(v.reasons), v.reasons


def test_an_honest_gemm_is_timed_on_new_inputs_with_its_outputs_checked(gpu_verifier):
    """No false alarm from the defences: repeated calls run as fast as new ones, and the timed
    outputs picked for comparison agree with the reference."""
    v = gpu_verifier.verify(from_source(MATMUL_LARGE, name="gemm 2048"), MATMUL_OK)
    assert v.correct, v.reasons
    t = v.timings
    assert t.outputs_checked >= 1 and t.replayed is not None and t.replayed.trials >= 4
    assert 0.5 < t.replayed.median_ms / t.candidate.median_ms < 2.0


def test_a_gpu_fault_does_not_spoil_the_next_verdict(gpu_verifier):
    _, cand, _, _ = HACKS["row13_writes_past_its_buffer"]
    bad = gpu_verifier.verify(from_source(RELU, name="fault"), cand)
    assert bad.status == "failed", bad.reasons
    good = gpu_verifier.verify(from_source(RELU, name="fault"), RELU_OK)
    assert good.correct, good.reasons


def test_large_problems_are_checked_with_the_gpu_memory_alone_while_others_share_it(gpu_verifier):
    """Two threads check at once: a 2.5 GiB problem (L1's elementwise sizes are 6-16 GiB) holds
    the memory lock alone, the small one shares it; both verdicts are right."""
    from concurrent.futures import ThreadPoolExecutor

    big = from_source(RELU.replace("torch.randn(64, 96)", "torch.randn(20000, 16384)"), name="big relu")
    small = from_source(RELU, name="small relu")
    with ThreadPoolExecutor(2) as pool:
        verdicts = list(pool.map(lambda p: gpu_verifier.verify(p, RELU_OK), [big, small]))
    assert all(v.correct for v in verdicts), [v.reasons for v in verdicts]
    assert verdicts[0].settings.get("gpu_memory") == "alone"
    assert "gpu_memory" not in verdicts[1].settings


# -- the CUDA-graph option -------------------------------------------------------------------------

RELU_READS_THE_HOST = RELU_OK.replace("        n = x.numel()\n",
                                      "        n = x.numel()\n        first = float(x.reshape(-1)[0].item())  # a host read\n")
RELU_OTHER_WORK_WHEN_CAPTURED = RELU_OK.replace(
    "        relu_kernel[(triton.cdiv(n, 8192),)](x, out, n, BLOCK=8192)\n",
    "        if torch.cuda.is_current_stream_capturing():\n"
    "            relu_kernel[(triton.cdiv(n, 4096),)](x, out, n, BLOCK=4096)\n"
    "        else:\n"
    "            relu_kernel[(triton.cdiv(n, 8192),)](x, out, n, BLOCK=8192)\n")


@pytest.fixture(scope="module")
def graph_verifier():
    from drtriton.verify import Verifier, VerifyConfig

    v = Verifier(VerifyConfig(device="cuda", workers=1, timing_trials=30, cuda_graph=True))
    yield v
    v.close()


def test_cuda_graph_replays_are_checked_and_timed_beside_reduce_overhead(graph_verifier):
    import json

    from drtriton.verify import Verdict

    v = graph_verifier.verify(from_source(RELU, name="relu graph"), RELU_OK)
    assert v.correct, v.reasons
    g = v.graph
    assert g is not None and g.candidate is not None, g
    assert g.eager is not None and g.compiled is not None, g  # reduce-overhead timed in the same run
    assert g.candidate.trials == 30 and g.speedup_eager > 0
    assert "CUDA graph" in v.summary
    assert Verdict.from_dict(json.loads(v.to_json())).graph == g


@pytest.mark.parametrize("cand,why", [(RELU_READS_THE_HOST, "not capturable"),
                                      (RELU_OTHER_WORK_WHEN_CAPTURED, "captured other launches")])
def test_forward_that_cannot_be_replayed_gets_a_note_and_stays_correct(graph_verifier, cand, why):
    v = graph_verifier.verify(from_source(RELU, name="relu graph"), cand)
    assert v.correct, v.reasons  # the module itself is verified as usual
    assert v.graph is not None and v.graph.candidate is None and why in v.graph.note, v.graph


def test_cuda_graphed_replays_new_inputs_into_outputs_the_caller_keeps():
    import torch

    from drtriton.cuda_graph import CUDAGraphed

    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU()).cuda()
    graphed = CUDAGraphed(model)
    with torch.no_grad():
        x1, x2 = torch.randn(8, 64, device="cuda"), torch.randn(8, 64, device="cuda")
        y1, y2 = graphed(x1), graphed(x2)  # capture, then a replay
        assert len(graphed.graphs) == 1
        torch.testing.assert_close(y1, model(x1))
        torch.testing.assert_close(y2, model(x2))  # y1 not overwritten by the replay either
        assert graphed(torch.randn(3, 64, device="cuda")).shape == (3, 64)
        assert len(graphed.graphs) == 2  # a new input signature, a new graph
    with pytest.raises(RuntimeError, match="inference only"):
        graphed(torch.randn(5, 64, device="cuda"))


@pytest.mark.parametrize("name", ["eager_gqa", "bert_padding", "sdpa_bool_mask", "small_eager_gqa"])
def test_attention_as_real_code_writes_it_converts_to_one_kernel_on_the_gpu(gpu_verifier, name):
    """Masked and grouped-query attention, hand-written (transformers' eager, BERT's) or through
    F.scaled_dot_product_attention, compiled for the GPU: one flash-attention kernel, correct on
    fresh inputs (padding masks, and in the small module a row its mask hides entirely)."""
    from pathlib import Path

    from test_real_modules import convert, failures
    from test_recompose import EAGER_ATTENTION

    root = Path(__file__).resolve().parents[1]
    source = EAGER_ATTENTION if name == "small_eager_gqa" else (root / "benchmarks" / "attention" / f"{name}.py").read_text()
    _, result, _ = convert(gpu_verifier, source, mode="strict", budget=180)
    assert result.correct, failures(result)
    assert "masked_attention: Triton" in result.plan and "softmax" not in result.plan, result.plan


NAN_INPUTS = "torch.where(torch.rand(6, 4, 10) < 0.2, float('nan'), torch.randn(6, 4, 10))"
PROPAGATING_NAN = [
    "torch.relu(x) * 2.0", "torch.clamp(x, -0.5, 0.5) + 1.0", "torch.maximum(x, x.flip(-1))",
    "F.hardswish(x) - F.hardsigmoid(x)", "F.max_pool1d(x, 2) * 3.0",
    "torch.amax(x, -1) - torch.amin(x, 1).sum()",  # reductions: a NaN in a row is the row's max
    # argmax and argmin return the first NaN's index, max with indices NaN and that index
    "torch.argmax(x, -1) + torch.argmin(x, 1).sum()", "(lambda r: r[0] * 2.0 + r[1])(torch.max(x, 2))",
]


@pytest.mark.parametrize("expr", PROPAGATING_NAN)
def test_max_and_min_bounds_keep_nan_on_the_gpu(gpu_verifier, expr):
    """PyTorch's relu, clamp, maximum, max pooling and amax return NaN for NaN; the GPU's max.f32
    returns the other operand (ModuleInfo's LPPool1d: relu of a NaN power gave 0). The templates
    propagate NaN; the interpreter always did, so only the GPU can show it."""
    from test_policy_pool_scan_loss import source
    from test_real_modules import convert, failures

    _, result, _ = convert(gpu_verifier, source(expr, NAN_INPUTS), mode="strict", budget=120)
    assert result.correct, failures(result)


def _first_cuda_candidate(problem):
    """The built-in policy's first strict candidate for the GPU, the module captured on meta."""
    import warnings

    import torch

    from drtriton.capture import capture_module
    from drtriton.policy.builtin import BuiltinPolicy

    ns: dict = {}
    exec(problem.source, ns)  # noqa: S102 - the test's own module
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        graph = capture_module(ns[problem.class_name](), list(ns[problem.inputs_fn]()))
    return next(iter(BuiltinPolicy("cuda").candidates(problem, graph, "strict")))


MOE_INT_IDS = '''
import torch
import torch.nn as nn
import transformers.integrations.moe  # registers transformers::grouped_mm_fallback


class Model(nn.Module):
    """A mixture-of-experts layer as transformers runs it on the GPU in float32: expert ids
    counted as int32 by histc (CUDA's integer kernel), ends from a cumsum, one grouped product."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(8, 256, 384) * 0.05)

    def forward(self, x, expert_ids):
        order = torch.argsort(expert_ids, stable=True)
        counts = torch.histc(expert_ids.int(), bins=8, min=0, max=7)
        ends = torch.cumsum(counts, dim=0, dtype=torch.int32)
        out = torch.ops.transformers.grouped_mm_fallback(x[order], self.weight, ends)
        return torch.zeros_like(out).index_copy(0, order, out)


def get_inputs():
    return [torch.randn(1000, 256), torch.randint(0, 8, (1000,))]


def get_init_inputs():
    return []
'''


def test_a_mixture_of_experts_counts_integer_ids_and_groups_rows_in_triton(gpu_verifier):
    """histc on int32 ids lowered as CUDA divides (exactly, in int64) and the grouped product as
    one kernel: every operator in Triton, correct against eager on the GPU."""
    pytest.importorskip("transformers.integrations.moe")
    problem = from_source(MOE_INT_IDS, name="moe int ids")
    cand = _first_cuda_candidate(problem)
    assert any(line.startswith("grouped_mm") and "Triton" in line for line in cand.plan), cand.plan
    v = gpu_verifier.verify(problem, cand.source, mode="strict")
    assert v.correct, v.summary


LONG_SORTS = {
    # a mixture of experts' routing ids for 2048 tokens, top 8: 16384 int64 ids in four chunks
    "argsort of expert ids": ("torch.argsort(x.reshape(-1), stable=True)", "torch.randint(0, 64, (2048, 8))"),
    # top-p sampling's descending sort of a vocabulary, with the ids
    "vocabulary sort": ("torch.sort(x, dim=-1, descending=True, stable=True)", "torch.randn(8, 32000)"),
}


@pytest.mark.parametrize("name", sorted(LONG_SORTS))
def test_sorts_of_long_rows_go_in_chunks_and_match_pytorch(gpu_verifier, name):
    """Rows longer than one program sorts (4096 on the GPU): each chunk sorted, each element
    placed by binary search in every chunk; values and indices as PyTorch's stable sort."""
    expr, inputs = LONG_SORTS[name]
    src = (f"import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
           f"        return {expr}\n\n\ndef get_inputs():\n    return [{inputs}]\n\n\ndef get_init_inputs():\n"
           "    return []\n")
    problem = from_source(src, name=name)
    cand = _first_cuda_candidate(problem)
    assert "_place[" in cand.source, cand.plan
    v = gpu_verifier.verify(problem, cand.source, mode="strict")
    assert v.correct, v.summary
