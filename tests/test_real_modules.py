"""Modules as people write them convert on CPU (Triton interpreter, small shapes): nested module
trees, the file's own import aliases, sizes read with `.item()`, recurrent layers, other batch
sizes; and a crashing template or problem never takes the search or a bench run down."""

import os
import re
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from drtriton.problem import from_source
from drtriton.search import Search, SearchConfig
from test_policy_pool_scan_loss import source

warnings.filterwarnings("ignore")


def convert(verifier, source: str, mode: str = "strict", budget: float = 240.0):
    problem = from_source(textwrap.dedent(source))
    search = Search(problem, verifier, SearchConfig(mode=mode, budget_s=budget))
    events = list(search.run())
    return problem, search.result, events


def same_results(tmp_path, reference: str, generated: str, ref_class: str, batches, shape) -> None:
    """Build the reference and the generated module (same state), call both on inputs of
    `shape` with each leading size in `batches`; in a fresh interpreter-mode process, as a user
    would import the written file."""
    (tmp_path / "ref.py").write_text(reference)
    (tmp_path / "new.py").write_text(generated)
    script = f"""
import torch, ref, new
torch.manual_seed(0)
a, b = ref.{ref_class}(), new.{ref_class}Triton()
assert a.state_dict().keys() == b.state_dict().keys()
b.load_state_dict(a.state_dict())
for batch in {list(batches)!r}:
    x = torch.randn(batch, *{tuple(shape)!r})
    with torch.no_grad():
        torch.testing.assert_close(b(x), a(x), atol=1e-4, rtol=1e-4)
print("same")
"""
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "TRITON_INTERPRET": "1"})
    assert r.returncode == 0 and "same" in r.stdout, r.stderr[-3000:]


def failures(result):
    return result.reason, [(a.fragment, a.verdict.reasons[:1]) for a in result.attempts]


NESTED = '''
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return x + torch.relu(self.fc(self.norm(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Linear(16, 32), nn.GELU())
        self.blocks = nn.ModuleList([Block(32) for _ in range(2)])
        self.heads = nn.ModuleDict({"main": nn.Linear(32, 8), "aux": nn.Linear(32, 8)})
        self.register_buffer("shift", torch.randn(8))

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.heads["main"](x) - self.heads["aux"](x) + self.shift


def get_inputs():
    return [torch.randn(6, 16)]


def get_init_inputs():
    return []
'''


def unhoisted(source: str) -> str:
    """The source with forward's `_pathN = <module path>` locals put back where they are used."""
    paths = dict(re.findall(r"^\s*(_path\d+) = (.+)$", source, flags=re.M))
    for _ in range(len(paths) + 1):
        source = re.sub(r"\b_path\d+\b", lambda m: paths.get(m.group(0), m.group(0)), source)
    return source


def test_nested_module_trees_assemble_as_drop_in_replacements(cpu_verifier, tmp_path):
    problem, result, _ = convert(cpu_verifier, NESTED, mode="strict")
    assert result.correct, failures(result)
    spelled = unhoisted(result.source)  # parameters reached by their real paths
    assert "self.stem[0].weight" in spelled and "self.blocks[1].fc.bias" in spelled
    assert "self.heads.main.weight" in spelled
    same_results(tmp_path, NESTED, result.source, "Net", (1, 3, 9), (16,))  # get_inputs has 6


def test_the_files_import_aliases_are_kept(cpu_verifier):
    _, result, _ = convert(cpu_verifier, '''
        import torch as th
        from torch import nn as tnn


        class AliasNet(th.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = tnn.Linear(16, 16)

            def forward(self, x):
                return th.relu(self.fc(x))


        def get_inputs():
            return [th.randn(4, 16)]


        def get_init_inputs():
            return []
    ''')
    assert result.correct, failures(result)
    assert "import torch as th" in result.source and "from torch import nn as tnn" in result.source


def test_a_size_read_with_item_is_captured_as_its_value(cpu_verifier):
    _, result, _ = convert(cpu_verifier, '''
        import torch
        import torch.nn as nn


        class Scaled(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("scale", torch.tensor(3.0))
                self.fc = nn.Linear(8, 8)

            def forward(self, x):
                return self.fc(x) * float(self.scale.item())


        def get_inputs():
            return [torch.randn(4, 8)]


        def get_init_inputs():
            return []
    ''')
    assert result.correct, failures(result)


def test_a_constructor_that_reads_tensor_values_is_captured_on_the_cpu(cpu_verifier):
    # torchvision's RegNet computes its stage widths with tensors and .tolist() in __init__,
    # which cannot run on the meta device: capture builds the module on the CPU instead
    _, result, _ = convert(cpu_verifier, '''
        import torch
        import torch.nn as nn


        class Widths(nn.Module):
            def __init__(self):
                super().__init__()
                widths = [int(w) for w in torch.linspace(4, 12, 3).round()]
                self.layers = nn.Sequential(*[nn.Linear(a, b) for a, b in zip([8] + widths, widths)])

            def forward(self, x):
                return torch.relu(self.layers(x))


        def get_inputs():
            return [torch.randn(4, 8)]


        def get_init_inputs():
            return []
    ''', mode="strict")
    assert result.correct, failures(result)


def test_a_module_that_versions_its_state_dict_converts(cpu_verifier):
    # torchvision's MNASNet refuses a state dict without its version metadata: the verifier's
    # copy of the constructed state keeps it
    _, result, _ = convert(cpu_verifier, '''
        import torch
        import torch.nn as nn


        class Versioned(nn.Module):
            _version = 2

            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8)

            def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs):
                if local_metadata.get("version", None) not in (1, 2):
                    raise ValueError("version should be set to 1 or 2")
                super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                              unexpected_keys, error_msgs)

            def forward(self, x):
                return torch.relu(self.fc(x))


        def get_inputs():
            return [torch.randn(4, 8)]


        def get_init_inputs():
            return []
    ''', mode="strict")
    assert result.correct, failures(result)


LSTM = '''
import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, batch_first=True)
        self.out = nn.Linear(16, 4)

    def forward(self, x):
        h, _ = self.lstm(x)
        return torch.tanh(self.out(h[:, -1, :]))


def get_inputs():
    return [torch.randn(3, 5, 8)]


def get_init_inputs():
    return []
'''


def test_an_lstm_converts_in_mixed_mode_and_takes_other_batch_sizes(cpu_verifier, tmp_path):
    # the hidden state forward builds (zeros of the batch size, on the input's device) is
    # traced symbolic: no captured batch size or meta device is left in the generated code
    _, result, _ = convert(cpu_verifier, LSTM, mode="mixed")
    assert result.correct, failures(result)
    assert "lstm: Triton" in result.plan  # the recurrence template, not PyTorch's cuDNN kernel
    assert "device='meta'" not in result.source and "device=x.device" in result.source
    same_results(tmp_path, LSTM, result.source, "Tagger", (7,), (5, 8))  # get_inputs has 3


ENCODER_AT_BATCH_ONE = '''
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.layer(x)


def get_inputs():
    return [torch.randn(1, 5, 16)]


def get_init_inputs():
    return []
'''


def test_a_transformer_layer_converted_at_batch_one_takes_other_batch_sizes(cpu_verifier, tmp_path):
    # attention's in-projection runs `linear` on the sequence-first (5, 1, 16): its C++ code
    # reads the batch and guards it to 1 even in a size-oblivious trace, so views baked in 1 and
    # a batch of 2 failed; capture now sees the guard and traces at a batch of 2 instead
    from drtriton.capture import capture_module

    ns: dict = {}
    exec(ENCODER_AT_BATCH_ONE, ns)
    with torch.device("meta"):
        graph = capture_module(ns["Encoder"]().eval(), ns["get_inputs"]())
    assert graph.values[graph.inputs[0]].symbolic == [0]
    _, result, _ = convert(cpu_verifier, ENCODER_AT_BATCH_ONE)
    assert result.correct, failures(result)
    assert [[2, 5, 16]] in result.verdict.shapes_checked  # the verifier's second configuration
    same_results(tmp_path, ENCODER_AT_BATCH_ONE, result.source, "Encoder", (1, 3), (5, 16))


SOFTMAX_HEAD = '''
import torch
import torch.nn as nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return torch.softmax(self.fc(x), dim=-1)


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
'''


def test_a_crashing_template_costs_its_variant_not_the_search(cpu_verifier, monkeypatch):
    from drtriton.policy.emit import rows

    def broken(*args, **kwargs):
        raise IndexError("list index out of range")

    monkeypatch.setattr(rows, "emit", broken)
    # mixed: the softmax runs as PyTorch and the rest still converts
    _, result, events = convert(cpu_verifier, SOFTMAX_HEAD, mode="mixed")
    assert result.correct, failures(result)
    assert "softmax: PyTorch" in result.plan
    assert any("softmax: PyTorch (the softmax template failed: IndexError" in n for n in result.fallbacks)
    # strict: no module, a reason, and no exception out of the search
    _, result, events = convert(cpu_verifier, SOFTMAX_HEAD, mode="strict")
    assert not result.correct and result.reason
    assert events[-1].kind == "done"


def test_an_internal_error_ends_the_search_with_its_reason(cpu_verifier, monkeypatch):
    from drtriton import search as search_module

    def broken(*args, **kwargs):
        raise KeyError("boom")

    monkeypatch.setattr(search_module, "Program", broken)
    _, result, events = convert(cpu_verifier, SOFTMAX_HEAD)
    assert events[-1].kind == "done"
    assert not result.correct and "internal error: KeyError" in result.reason


def test_bench_records_a_failing_problem_and_goes_on(cpu_verifier, monkeypatch, tmp_path):
    from drtriton import search as search_module
    from drtriton.bench import run_search_bench

    real_init = search_module.Search.__init__

    def init(self, problem, *args, **kwargs):
        if problem.name == "bad":
            raise RuntimeError("a bug outside the search")
        real_init(self, problem, *args, **kwargs)

    monkeypatch.setattr(search_module.Search, "__init__", init)
    good = from_source(SOFTMAX_HEAD, name="good")
    bad = from_source(SOFTMAX_HEAD, name="bad")
    entries = run_search_bench([bad, good], cpu_verifier, SearchConfig(mode="mixed", budget_s=120), tmp_path)
    assert [e.problem.name for e in entries] == ["bad", "good"]
    assert not entries[0].correct and "internal error: RuntimeError" in entries[0].reason
    assert entries[1].correct


def test_constants_made_in_forward_and_nested_parameters_in_epilogues(cpu_verifier):
    # torch.tensor([...]) in forward is written into the module as its values; a parameter of a
    # nested block read by a fused epilogue gets a valid kernel argument name
    _, result, _ = convert(cpu_verifier, '''
        import torch
        import torch.nn as nn


        class Scale(nn.Module):
            def __init__(self):
                super().__init__()
                self.gain = nn.Parameter(torch.randn(3))


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 3)
                self.scales = nn.ModuleList([Scale()])

            def forward(self, x):
                w = torch.tensor([1.0, -2.0, 3.0])
                return self.fc(x) * w + self.scales[0].gain


        def get_inputs():
            return [torch.randn(4, 3)]


        def get_init_inputs():
            return []
    ''', mode="mixed")
    assert result.correct, failures(result)
    assert "torch.tensor([1.0, -2.0, 3.0], dtype=torch.float32, device=x.device)" in result.source
    assert "self.scales[0].gain" in result.source


# -- operators outside KernelBench's vocabulary (issue 16): Core ATen math, masks, lowering --

RMSNORM_CAUSAL = '''
import math
import torch
import torch.nn as nn


class Block(nn.Module):
    """LLaMA's RMSNorm (rsqrt) and a causal mask made with masked_fill, as people write them."""

    def __init__(self, d=16, t=8):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.qk = nn.Linear(d, 2 * d)
        self.register_buffer("mask", torch.tril(torch.ones(t, t)))

    def forward(self, x):
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
        q, k = self.qk(x).chunk(2, dim=-1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        att = att.masked_fill(self.mask == 0, float("-inf"))
        return torch.softmax(att, dim=-1) @ x


def get_inputs():
    return [torch.randn(2, 8, 16)]


def get_init_inputs():
    return []
'''


def test_rsqrt_and_masked_fill_convert_in_strict_mode(cpu_verifier):
    # masked_fill is lowered to where; rsqrt and the comparison are vocabulary operators
    _, result, _ = convert(cpu_verifier, RMSNORM_CAUSAL, mode="strict")
    assert result.correct, failures(result)
    assert result.mode == "strict" and not result.fallbacks


def test_lowering_keeps_covered_operators_and_maps_what_it_makes():
    from drtriton.capture import capture_module, uncovered

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = torch.nn.BatchNorm1d(8)
            self.drop = torch.nn.Dropout(0.2)

        def forward(self, x, keep):
            y = self.drop(self.bn(x)).masked_fill(~keep, 0.0)
            return torch.nn.functional.pixel_shuffle(y.view(2, 8, 1, 1), 2) + torch.addcmul(x, x, x).sum()

    net = Net().eval()
    graph = capture_module(net, [torch.randn(2, 8), torch.rand(2, 8) > 0.5])
    ops = [n.op for n in graph.nodes if n.op]
    assert "batch_norm" in ops  # functionalisation respells it; the lowered form still maps
    assert "where" in ops and "logical_not" in ops  # masked_fill -> where; ~keep
    assert not uncovered(graph), uncovered(graph)  # addcmul, pixel_shuffle: lowered to covered ops and views
    assert not any("dropout" in n.target for n in graph.nodes)  # eval dropout is its input


def test_a_cat_that_lowering_makes_a_copy_does_not_undo_the_lowering():
    """Falcon's grouped keys: `broadcast_to` (lowered to expand) in a graph with a key/value
    cache's first step, a cat of the keys with the empty start, which lowering turns into a copy.
    That cat counted as a covered operator lost, and the whole lowering was dropped: strict mode
    then had no plan ("broadcast_to needs PyTorch")."""
    transformers = pytest.importorskip("transformers")
    from drtriton.capture import capture_module, uncovered

    config = transformers.FalconConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=4,
                                       new_decoder_architecture=True, num_kv_heads=2, attn_implementation="eager")

    class Hidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = transformers.FalconModel(config).eval()

        def forward(self, ids):
            return self.model(input_ids=ids).last_hidden_state

    graph = capture_module(Hidden(), [torch.randint(0, 64, (2, 5))])
    assert not uncovered(graph), uncovered(graph)


GRU = '''
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 12, batch_first=True)

    def forward(self, x):
        out, h = self.gru(x)
        return out * torch.sigmoid(h[-1]).unsqueeze(1)


def get_inputs():
    return [torch.randn(2, 4, 8)]


def get_init_inputs():
    return []
'''


def test_a_gru_runs_as_one_recurrence_kernel(cpu_verifier):
    _, result, _ = convert(cpu_verifier, GRU, mode="strict")
    assert result.correct, failures(result)
    assert "torch.ops.aten.gru" not in result.source and "gru: Triton" in result.plan
    assert result.source.count("_recurrence_kernel[") == 1  # one layer, one direction: one launch


RECURRENT = '''
import torch
import torch.nn as nn


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = {layer}

    def forward(self, {args}):
        {body}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''

# (layer, forward's arguments, its body, get_inputs, the input shape past the leading dim)
RECURRENT_FORMS = [
    # PyTorch's default layout is sequence first: the leading dim other shapes vary is the
    # sequence, which an unrolled loop could not take
    ("nn.GRU(8, 12, bidirectional=True)", "x", "out, h = self.rnn(x)\n        return out, h",
     "torch.randn(6, 3, 8)", (3, 8)),
    ("nn.LSTM(8, 12, num_layers=2, bidirectional=True)", "x, h0, c0",
     "out, (h, c) = self.rnn(x, (h0, c0))\n        return out, h, c",
     "torch.randn(5, 3, 8), torch.randn(4, 3, 12), torch.randn(4, 3, 12)", None),
    ("nn.RNN(8, 12, num_layers=2, nonlinearity='relu', batch_first=True, bias=False)", "x",
     "return self.rnn(x)[0]", "torch.randn(3, 7, 8)", (7, 8)),
    ("nn.RNN(8, 12)", "x", "return self.rnn(x)[1]", "torch.randn(7, 2, 8)", (2, 8)),
]


@pytest.mark.parametrize("layer,args,body,inputs,tail", RECURRENT_FORMS, ids=[f[0] for f in RECURRENT_FORMS])
def test_recurrent_layers_walk_the_sequence_in_a_kernel_and_take_other_lengths(cpu_verifier, tmp_path, layer, args,
                                                                               body, inputs, tail):
    src = RECURRENT.format(layer=layer, args=args, body=body, inputs=inputs)
    _, result, _ = convert(cpu_verifier, src, mode="strict")
    assert result.correct, failures(result)
    op = {"GRU": "gru", "LSTM": "lstm", "RNN": "rnn_relu" if "relu" in layer else "rnn_tanh"}[layer[3:layer.index("(")]]
    assert result.plan == f"{op}: Triton (precision=ieee)" and result.source.count("_recurrence_kernel[") >= 1
    if tail is not None:  # another leading size than get_inputs' (the sequence, or the batch)
        same_results(tmp_path, src, result.source, "Recurrent", (2, 9), tail)


STRICT_FORMS = [
    # (forward expression, get_inputs, arguments)
    ("1.0 - torch.sigmoid(x) * 2.0", "torch.randn(4, 5)", "x"),  # a number first: rsub
    # attention over heads: (B, H, T, d) @ (B, H, d, T), a transposed view, batched over two dims
    ("torch.softmax(q @ k.transpose(-2, -1) * 0.5, dim=-1) @ v",
     "torch.randn(2, 3, 8, 4), torch.randn(2, 3, 8, 4), torch.randn(2, 3, 8, 4)", "q, k, v"),
    ("torch.logit(x, eps=1e-3)", "torch.rand(4, 5)", "x"),  # lowered: comparisons, where, log
    ("F.binary_cross_entropy_with_logits(x, y)", "torch.randn(4, 5), torch.rand(4, 5)", "x, y"),
    ("x[:, i, j] * 2.0", "torch.randn(2, 7, 6, 3), torch.randint(0, 7, (4,)), torch.randint(0, 6, (5, 1))", "x, i, j"),
    ("x[i, :, j]", "torch.randn(7, 3, 6), torch.randint(-7, 7, (4,)), torch.randint(0, 6, (4,))", "x, i, j"),
    ("torch.cat([x, torch.flip(x, dims=[1])], dim=1).relu()", "torch.randn(3, 4, 5)", "x"),
    ("F.embedding(i, w)[:, -1]", "torch.randint(0, 11, (3, 4)), torch.randn(11, 6)", "i, w"),
    ("F.interpolate(x, scale_factor=2, mode='bilinear')", "torch.randn(2, 3, 5, 4)", "x"),
    ("F.interpolate(x, scale_factor=2, mode='nearest')", "torch.randn(2, 3, 5, 4)", "x"),
    ("F.pad(x, (-1, 2, 1, 0), value=float('-inf')).amax(-1)", "torch.randn(2, 3, 5, 4)", "x"),
    ("torch.addmm(b, x, w)", "torch.randn(6), torch.randn(4, 5), torch.randn(5, 6)", "b, x, w"),
    # positions from a padding mask (transformers): a scan of booleans counts in int64
    ("(m != 0).cumsum(-1) - 1", "torch.randint(0, 2, (3, 9))", "m"),
    ("torch.cumsum(x > 0, dim=0) * x", "torch.randn(5, 4)", "x"),
    # constant indices made in forward: one position keeps its axis (Falcon's rotary halves), a
    # 0-d one drops it
    # batched products whose batch dims broadcast: one key head for all query heads (Falcon's
    # multi-query attention), a batch of one, a matrix against a batch
    ("torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v",
     "torch.randn(2, 3, 8, 4), torch.randn(2, 1, 8, 4), torch.randn(2, 1, 8, 4)", "q, k, v"),
    ("torch.matmul(a, b) + torch.matmul(b.transpose(-2, -1)[0], a.transpose(-2, -1)).transpose(-2, -1)",
     "torch.randn(3, 5, 4), torch.randn(1, 4, 5)", "a, b"),
    # einsum's attention scores: a product against the second operand transposed
    ("torch.einsum('bhid,bhjd->bhij', q, k).softmax(-1)", "torch.randn(2, 3, 5, 4), torch.randn(2, 3, 6, 4)", "q, k"),
    ("torch.einsum('nd,jd->nj', x, w)", "torch.randn(5, 4), torch.randn(3, 4)", "x, w"),
    # nn.Bilinear: a product against the weight as one matrix, then a sum (not _trilinear)
    ("F.bilinear(x, y, w, b)", "torch.randn(2, 3, 4), torch.randn(2, 3, 5), torch.randn(6, 4, 5), torch.randn(6)",
     "x, y, w, b"),
    # lowerings that take several rounds: cross_entropy -> nll_loss_nd -> nll_loss -> nll_loss_forward
    ("F.cross_entropy(x, t, label_smoothing=0.1)", "torch.randn(4, 5), torch.randint(0, 5, (4,))", "x, t"),
    ("F.nll_loss(x.log_softmax(-1), t)", "torch.randn(4, 5), torch.randint(0, 5, (4,))", "x, t"),
    # masks cast as transformers writes them: to(device, dtype), to(dtype=..., device=...)
    ("(x > 0).to(x.device, torch.float32) * x + (x < 1).to(dtype=torch.float32, device=x.device)",
     "torch.randn(3, 4)", "x"),
    ("x[:, :, torch.tensor([-2])] * 2.0", "torch.randn(2, 4, 6, 8)", "x"),
    ("x[:, torch.tensor(1)] + torch.index_select(x, 1, torch.tensor(2))", "torch.randn(2, 4, 6)", "x"),
]


@pytest.mark.parametrize("expr,inputs,args", STRICT_FORMS, ids=[e for e, _, _ in STRICT_FORMS])
def test_real_code_forms_convert_in_strict_mode(cpu_verifier, expr, inputs, args):
    # advanced indexing (adjacent and not, negative positions), embedding, cat and flip run in
    # the indexing template; interpolate and addmm through Inductor's decompositions
    _, result, _ = convert(cpu_verifier, source(expr, inputs, args=args), mode="strict")
    assert result.correct, failures(result)


def test_a_fused_fragment_shapes_its_output_from_its_own_inputs(cpu_verifier):
    # triu lowers to a mask made from positions, `arange(n)[None, :] - arange(m)[:, None] >= 0`:
    # the fused (sub, ge) fragment's output has no input's shape, and the broadcast must be of
    # what forward holds, not of `sub`'s result inside the kernel (L1/14 failed with a NameError)
    _, result, _ = convert(cpu_verifier, source("torch.triu(x @ y)", "torch.randn(6, 6), torch.randn(6, 6)",
                                                args="x, y"), mode="strict")
    first = result.attempts[0]
    assert "sub, ge" in first.plan and first.verdict.correct, failures(result)


REGIONS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        y = self.lin(x)
        with torch.no_grad():
            with torch.autocast(device_type="cpu", enabled=False):  # as transformers' rotary embeddings
                z = y.float().sin()
            w = z * 2.0
        return torch.relu(w + y)


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
'''


def test_no_grad_and_disabled_autocast_regions_convert_in_strict_mode(cpu_verifier):
    # torch.export wraps each region in a higher-order operator calling a submodule; a plan once
    # took that submodule for a value (KeyError: 'submod_3': LLaMA, Mistral, Qwen2 on torch 2.11)
    _, result, _ = convert(cpu_verifier, REGIONS, mode="strict")
    assert result.correct, failures(result)


def test_inlined_regions_compute_the_same_and_an_enabled_autocast_is_refused():
    from drtriton.capture import CaptureError, capture_module, inline_context_regions

    scope: dict = {}
    exec(REGIONS, scope)
    model, x = scope["Model"](), torch.randn(4, 8)
    ep = torch.export.export(model, (x,), strict=False)

    def wrapped():
        return [n.target for n in ep.graph.nodes if isinstance(n.target, torch._ops.HigherOrderOperator)]

    assert wrapped(), "torch.export no longer wraps the regions: this test checks nothing"
    inline_context_regions(ep.graph_module)
    assert not wrapped() and not list(ep.graph_module.children())  # nested region and submodules gone
    torch.testing.assert_close(ep.module()(x), model(x))

    class Lower(torch.nn.Module):  # computes in bfloat16: captured as it is, it would be wrong
        def forward(self, x):
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                return x @ x

    class Cond(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda x: x.sin(), lambda x: x.cos(), (x,))

    for module, reason in ((Lower(), "autocast"), (Cond(), "cond")):
        with pytest.raises(CaptureError, match=reason):
            capture_module(module, [torch.randn(4, 4)])


def test_operators_of_other_libraries_are_called_through_torch_ops():
    # Mixtral's experts run transformers' own operator (transformers::grouped_mm_fallback): left
    # to PyTorch in mixed mode, it is called as torch.ops.<namespace>..., as aten's are
    from drtriton.policy.emit.pytorch import callable_name

    assert callable_name("transformers.grouped_mm_fallback.default") == \
        "torch.ops.transformers.grouped_mm_fallback.default"
    assert callable_name("aten.conv2d.default") == "torch.ops.aten.conv2d.default"
    assert callable_name("operator.mul") == "operator.mul"  # size arithmetic stays Python
    assert callable_name("torch.sym_max") == "torch.sym_max"
    assert callable_name("builtins.float") == "float"


def test_a_cast_with_a_layout_is_a_dtype_conversion():
    # OPT, BART and CLIP build their attention masks with to(dtype=..., layout=..., device=...)
    from drtriton.capture import Node, Value
    from drtriton.ops.aten import match

    values = {"m": Value("m", [2, 3], "torch.float32", "node"), "c": Value("c", [2, 3], "torch.bool", "node")}
    cast = Node("c", "aten.to.dtype_layout", [{"value": "m"}], {"dtype": "torch.bool", "layout": "torch.strided",
                                                                 "device": {"device": "cpu"}}, ["c"])
    assert match(cast, values) == ("to_dtype", {"dtype": "bool"})
    sparse = Node("c", "aten.to.dtype_layout", [{"value": "m"}], {"dtype": "torch.bool", "layout": "torch.sparse_coo"},
                  ["c"])
    assert match(sparse, values) is None


UNUSED = '''
import torch
import torch.nn as nn


class Pooled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x, ids):
        h = self.fc(x)
        pooled = h[torch.arange(h.shape[0]), ids.argmax(dim=-1)]  # computed, never returned (CLIP's pooler)
        return torch.relu(h)


def get_inputs():
    return [torch.randn(3, 5, 8), torch.randint(0, 5, (3, 5))]


def get_init_inputs():
    return []
'''


def test_values_forward_never_returns_are_not_computed(cpu_verifier):
    _, result, _ = convert(cpu_verifier, UNUSED, mode="strict")
    assert result.correct, failures(result)
    assert "argmax" not in result.plan and "index" not in result.plan and "linear" in result.plan


CACHE_AND_POOLER = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.pooler = nn.Linear(8, 8)
        self.register_buffer("keys", torch.tensor([]), persistent=False)

    def forward(self, x):
        h = self.fc(x)
        pooled = torch.tanh(self.pooler(h[:, 0]))  # computed, never returned (BERT's pooler)
        keys = torch.cat([torch.tensor([]), h], dim=-2)  # a key cache that starts empty (DynamicCache)
        cached = torch.cat([self.keys, x], dim=-2)  # the rest an input: a copy of it
        pos = torch.cumsum((x[..., 0] > 0).int(), 1).type_as(x)  # RoBERTa's position ids
        flat = torch.cat([torch.tensor([]), h.transpose(1, 2)], dim=-1).view(3, 40)  # a view of the copy
        values = torch.cat([torch.tensor([]), h.transpose(1, 2)], dim=-1)  # repeated and read (repeat_kv)
        repeated = values[:, None].expand(-1, 2, -1, -1).reshape(3, 16, 5)
        return F.pad(keys, (1, 0)) [..., 1:] + pos[..., None] + cached, flat, repeated @ repeated.transpose(1, 2)


def get_inputs():
    return [torch.randn(3, 5, 8)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("tail", [
    "c.chunk(2, 0)[0].view(-1)",  # a view behind getitem
    "c.clone().view(-1)",  # a clone keeps the strides it copies
    "F.dropout(c, 0.5, training=False).view(-1)",  # eval-mode dropout is c itself
    "(c * 2).view(-1)",  # an elementwise result keeps them too (PyTorch's, in mixed mode)
    "c",  # the output
])
def test_a_cat_of_a_view_stays_a_copy_where_a_later_view_needs_its_layout(tail):
    """A one-tensor cat of a view is the view itself only where nothing after it relies on the
    cat's contiguous layout."""
    from drtriton.capture import capture_module

    class Cat(nn.Module):
        def forward(self, x, w):
            c = torch.cat([torch.tensor([]), (x @ w).t()], dim=-1)
            return eval(tail, {"c": c, "F": F, "torch": torch})

    graph = capture_module(Cat(), [torch.randn(4, 3), torch.randn(3, 6)])
    assert [n.target for n in graph.nodes].count("aten.cat.default") == 1, tail


def test_a_cache_that_starts_empty_and_a_dead_pooler_convert_in_strict_mode(cpu_verifier):
    """torch.cat skips a 1-D empty tensor beside others (its dim is the others'); lowering what
    the vocabulary lacks (type_as, pad) is not given up because a value no output needs (a
    pooler) leaves the graph with it (transformers' OPT, Phi, Qwen3, RoBERTa and ResNet failed so)."""
    from drtriton.capture import capture_module

    ns: dict = {}
    exec(CACHE_AND_POOLER, ns)
    graph = capture_module(ns["Block"](), ns["get_inputs"]())
    cats = [n for n in graph.nodes if n.target == "aten.cat.default"]
    # the first is h itself, the last h's transpose (read by a reshape, then a product); the copies of
    # x (an input) and of h's transpose that `view` reads (it needs the copy's layout) stay copies
    assert [(len(n.args[0]), n.attrs["dim"]) for n in cats] == [(1, 1), (1, 2)]
    assert not any("tanh" in n.target or "type_as" in n.target for n in graph.nodes)
    _, result, _ = convert(cpu_verifier, CACHE_AND_POOLER, mode="strict")
    assert result.correct, failures(result)
