"""The rollout sampler (training/sampling.py) against transformers: the same greedy tokens with
left padding and grouped-query attention, end-of-sequence handling as TRL masks it, samples from
softmax(logits / T), and on a GPU the CUDA-graph decode equal to the eager one."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from drtriton.training.sampling import complete_chats, sample, supports  # noqa: E402

PROMPTS = [[7, 8, 9, 10, 11, 12, 13], [20, 21, 22], [30, 31, 32, 33, 34]]


def _model(eos: int = 5, **overrides):
    from transformers import AutoModelForCausalLM, Qwen2Config

    torch.manual_seed(0)
    # wide initialisation: a random model whose argmax changes from token to token
    config = dict(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=256, eos_token_id=eos, pad_token_id=1,
                  tie_word_embeddings=False, initializer_range=0.4)
    config.update(overrides)
    return AutoModelForCausalLM.from_config(Qwen2Config(**config)).eval()


def _hf_greedy(model, prompts, n):
    longest = max(map(len, prompts))
    ids = torch.tensor([[1] * (longest - len(p)) + p for p in prompts])
    mask = (ids != 1).long()
    out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n, do_sample=False, pad_token_id=1,
                         eos_token_id=model.config.eos_token_id)
    return out[:, longest:].tolist()


def test_greedy_tokens_equal_transformers():
    model = _model(eos=95)
    ours = sample(model, PROMPTS, 24, 0.0, [95], 1, use_graph=False)
    for mine, theirs in zip(ours, _hf_greedy(model, PROMPTS, 24)):
        assert mine == theirs[:len(mine)]
        assert len(set(mine)) > 3  # not one repeated token: the comparison means something


def test_completions_end_at_the_first_end_of_sequence_token():
    model = _model(eos=95)
    free = sample(model, PROMPTS, 24, 0.0, [95], 1, use_graph=False)
    stop = free[0][4]  # make the fifth greedy token of the first row an end of sequence
    ours = sample(model, PROMPTS, 24, 0.0, [stop], 1, use_graph=False)
    assert ours[0] == free[0][:free[0].index(stop) + 1]
    for row, full in zip(ours, free):
        assert row == (full[:full.index(stop) + 1] if stop in full else full)


def test_rollouts_that_end_early_are_reported_while_the_rest_decode():
    model = _model(eos=95)
    free = sample(model, PROMPTS, 40, 0.0, [95], 1, use_graph=False)
    stop = free[0][4]  # the first row ends at its fifth token; the others later or never
    heard = []
    ours = sample(model, PROMPTS, 40, 0.0, [stop], 1, use_graph=False,
                  on_done=lambda row, ids: heard.append((row, ids)))
    last = max(range(len(ours)), key=lambda r: len(ours[r]))
    assert heard and heard[0] == (0, ours[0])  # reported with the ids the batch returns
    assert all(ids == ours[row] and ids[-1] == stop for row, ids in heard)  # only ended rows, once each
    assert len({row for row, _ in heard}) == len(heard) and last not in {row for row, _ in heard}


def test_samples_follow_the_softmax_at_the_temperature():
    model = _model(eos=95)
    temperature, n = 0.7, 4000
    longest = len(PROMPTS[0])
    with torch.no_grad():
        logits = model(torch.tensor([PROMPTS[0]])).logits[0, longest - 1]
    probs = torch.softmax(logits / temperature, -1)
    torch.manual_seed(1)
    first = [c[0] for c in sample(model, [PROMPTS[0]] * n, 1, temperature, [95], 1, use_graph=False)]
    freq = torch.bincount(torch.tensor(first), minlength=probs.numel()).float() / n
    assert 0.5 * (freq - probs).abs().sum() < 0.05  # total variation; about 0.02 from sampling noise alone


def test_only_plain_fp32_qwen2_is_supported():
    from transformers import AutoModelForCausalLM, LlamaConfig

    assert supports(_model())
    assert not supports(_model(use_sliding_window=True, sliding_window=4))
    assert not supports(_model().to(torch.bfloat16))  # transformers' generate samples those
    assert not supports(_model(hidden_act="gelu"))
    llama = AutoModelForCausalLM.from_config(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32,
                                                         num_hidden_layers=1, num_attention_heads=2))
    assert not supports(llama)


def test_chats_fall_back_to_generate_for_other_models(monkeypatch):
    from drtriton.training import sampling
    from drtriton.training.tiny import build_tokenizer

    tokenizer = build_tokenizer(["def f(x):\n    return x + 1\n"] * 20, vocab_size=300)
    model = _model(vocab_size=len(tokenizer), eos=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    chats = [[{"role": "user", "content": "def f(x):"}], [{"role": "user", "content": "return"}]]
    fast = complete_chats(model, tokenizer, chats, 12)
    monkeypatch.setattr(sampling, "supports", lambda m: False)
    assert complete_chats(model, tokenizer, chats, 12) == fast


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the CUDA-graph decode needs a GPU")
def test_graph_decode_equals_eager_decode_on_gpu():
    model = _model(eos=95).cuda()
    assert sample(model, PROMPTS, 48, 0.0, [95], 1, use_graph=True) == \
        sample(model, PROMPTS, 48, 0.0, [95], 1, use_graph=False)


def _flat_model():
    """Every logit 0 whatever the input: each token a fresh uniform draw."""
    model = _model(eos=95)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    return model


@pytest.mark.parametrize("graph", [False, pytest.param(True, marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="the CUDA-graph decode needs a GPU"))])
def test_every_decode_step_draws_new_noise(graph):
    """A replayed graph must not replay its random numbers: with flat logits, a row that drew the
    same noise every step would repeat one token."""
    model = _flat_model().to("cuda" if graph else "cpu")
    rows = sample(model, [PROMPTS[0]] * 8, 16, 1.0, [-1], 1, use_graph=graph)  # no end of sequence
    assert all(len(set(row)) > 4 for row in rows)
    assert len({tuple(row) for row in rows}) == 8


def test_one_new_token_needs_no_decode_step():
    model = _model(eos=95)
    assert [len(c) for c in sample(model, PROMPTS, 1, 0.0, [95], 1, use_graph=True)] == [1, 1, 1]
