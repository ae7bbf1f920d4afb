"""Rollouts fast enough for RL: the tiny model's sampler, with a static KV cache and the decode
step replayed as a CUDA graph.

transformers' `generate` spends about 8 ms a token in Python for the tiny recipe's 6-layer
model (docs/benchmarks.md, "Training"), where the GPU work is a hundred small kernels: at 1,000
tokens a completion, generation was two thirds of an RL step. Here the whole batch decodes in
lock step: the prompts (left-padded) fill the cache in one forward pass, then each token is one
replay of a captured graph (forward over the cache, temperature, Gumbel-max sampling, the
end-of-sequence flags), and the host looks at the flags every few tokens only.

The forward pass is the Qwen2 architecture (the tiny recipe's), written against the model's own
weights, so it follows every optimiser step with nothing to copy; `supports` tells which models
it covers (others go through `generate`). Tests compare it with transformers token for token.
"""

from __future__ import annotations

from typing import Callable

import torch

_CHECK_EVERY = 16  # decode steps between looks at the end-of-sequence flags (each is a sync)


def supports(model) -> bool:
    """A Qwen2 model this sampler reproduces: full attention, plain RoPE, SiLU, fp32 weights (the
    tiny recipe's; bf16 would need transformers' fp32 islands), every weight in this process (not
    DeepSpeed ZeRO-3 shards)."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "model_type", None) != "qwen2":
        return False
    if getattr(config, "use_sliding_window", False) or getattr(config, "hidden_act", "silu") != "silu":
        return False
    if any(p.dtype != torch.float32 or hasattr(p, "ds_id") for p in model.parameters()):
        return False
    rope = getattr(config, "rope_scaling", None) or {}
    rope_type = rope.get("rope_type", rope.get("type", "default")) if isinstance(rope, dict) else "default"
    return rope_type == "default"


class _Weights:
    """The model's tensors by role (views of its parameters: updated in place by the optimiser)."""

    def __init__(self, model):
        inner, config = model.model, model.config
        self.embed = inner.embed_tokens.weight
        self.head = model.lm_head.weight
        self.norm, self.eps = inner.norm.weight, config.rms_norm_eps
        self.layers = inner.layers
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        rotary = inner.rotary_emb
        self.inv_freq = rotary.inv_freq.float()
        self.rope_scale = float(getattr(rotary, "attention_scaling", 1.0))


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def forward(w: _Weights, ids: torch.Tensor, positions: torch.Tensor, cache_k: list, cache_v: list,
            slots: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
    """Logits of the last position of `ids` [B, T]. Keys and values go to cache `slots` [T];
    position t attends to the cache where `key_mask` [B, T, L] is true. Everything is a tensor op
    with shapes fixed by the call: a decode step can be captured as a CUDA graph."""
    batch, steps = ids.shape
    x = w.embed[ids]
    freqs = positions.float()[..., None] * w.inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = (emb.cos() * w.rope_scale)[:, None], (emb.sin() * w.rope_scale)[:, None]
    bias = torch.zeros(key_mask.shape, dtype=x.dtype, device=x.device).masked_fill(~key_mask, float("-inf"))[:, None]
    group = w.heads // w.kv_heads
    for i, layer in enumerate(w.layers):
        attn, mlp = layer.self_attn, layer.mlp
        h = _rms(x, layer.input_layernorm.weight, w.eps)
        q = attn.q_proj(h).view(batch, steps, w.heads, w.head_dim).transpose(1, 2)
        k = attn.k_proj(h).view(batch, steps, w.kv_heads, w.head_dim).transpose(1, 2)
        v = attn.v_proj(h).view(batch, steps, w.kv_heads, w.head_dim).transpose(1, 2)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        cache_k[i].index_copy_(2, slots, k)
        cache_v[i].index_copy_(2, slots, v)
        keys, values = cache_k[i], cache_v[i]
        if group > 1:
            keys, values = keys.repeat_interleave(group, dim=1), values.repeat_interleave(group, dim=1)
        scores = q @ keys.transpose(-1, -2) * w.head_dim ** -0.5 + bias
        out = (torch.softmax(scores, dim=-1) @ values).transpose(1, 2).reshape(batch, steps, -1)
        x = x + attn.o_proj(out)
        h = _rms(x, layer.post_attention_layernorm.weight, w.eps)
        x = x + mlp.down_proj(torch.nn.functional.silu(mlp.gate_proj(h)) * mlp.up_proj(h))
    return _rms(x[:, -1], w.norm, w.eps) @ w.head.T


def _pick(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Greedy at temperature 0, else a sample from softmax(logits / temperature) (Gumbel-max:
    no host sync, so it can live in a graph)."""
    if temperature <= 0:
        return logits.argmax(-1)
    u = torch.rand_like(logits).clamp_(min=1e-20)
    return (logits / temperature - torch.log(-torch.log(u))).argmax(-1)


@torch.no_grad()
def sample(model, prompts: list[list[int]], max_new_tokens: int, temperature: float, eos_ids: list[int],
           pad_id: int, use_graph: bool | None = None,
           on_done: Callable[[int, list[int]], None] | None = None) -> list[list[int]]:
    """One completion per prompt (token ids, up to and including the first end-of-sequence
    token, as TRL masks them). `use_graph`: None = on CUDA. `on_done(row, ids)` hears of each
    completion that ends before the last one does, at the look at the flags after its end (so
    its verification can start while the rest decode)."""
    device = model.device
    w = _Weights(model)
    batch, longest = len(prompts), max(len(p) for p in prompts)
    total = longest + max_new_tokens
    dtype = w.embed.dtype
    shape = (batch, w.kv_heads, total, w.head_dim)
    cache_k = [torch.zeros(shape, dtype=dtype, device=device) for _ in w.layers]
    cache_v = [torch.zeros(shape, dtype=dtype, device=device) for _ in w.layers]
    ids = torch.full((batch, longest), pad_id, dtype=torch.long)
    for row, p in enumerate(prompts):  # left-padded: every row's last prompt token at the same slot
        ids[row, longest - len(p):] = torch.tensor(p, dtype=torch.long)
    ids = ids.to(device)
    start = torch.tensor([longest - len(p) for p in prompts], device=device)
    key_slots = torch.arange(total, device=device)
    prompt_slots = torch.arange(longest, device=device)
    valid = key_slots[None, None, :] >= start[:, None, None]
    causal = key_slots[None, None, :] <= prompt_slots[None, :, None]
    # a padding position sees itself only: never a row of -inf (NaN in the cache), never seen
    itself = key_slots[None, None, :] == prompt_slots[None, :, None]
    logits = forward(w, ids, prompt_slots[None, :] - start[:, None], cache_k, cache_v, prompt_slots,
                     (valid & causal) | itself)
    eos = torch.tensor(eos_ids, device=device)
    out = torch.full((batch, max_new_tokens), pad_id, dtype=torch.long, device=device)
    token = _pick(logits, temperature)
    out[:, 0] = token
    done = torch.isin(token, eos)
    slot = torch.full((1,), longest, dtype=torch.long, device=device)
    step = torch.ones((1,), dtype=torch.long, device=device)

    def decode() -> None:
        mask = (valid & (key_slots[None, None, :] <= slot)).expand(batch, 1, total)
        logits = forward(w, token[:, None], slot - start[:, None], cache_k, cache_v, slot, mask)
        nxt = torch.where(done, torch.full_like(token, pad_id), _pick(logits, temperature))
        out.index_copy_(1, step, nxt[:, None])
        done.logical_or_(torch.isin(nxt, eos))
        token.copy_(nxt)
        slot.add_(1)
        step.add_(1)

    run = decode
    if max_new_tokens > 1 and ((device.type == "cuda") if use_graph is None else use_graph):
        run = _captured(decode, token, out, done, slot, step)
    def cut(row: list[int]) -> list[int]:
        end = next((j for j, t in enumerate(row) if t in eos_ids), len(row) - 1)
        return row[:end + 1]

    told: set[int] = set()
    for i in range(1, max_new_tokens):
        if i % _CHECK_EVERY == 0:
            flags = done.tolist()
            if all(flags):
                break
            if on_done is not None:
                for row in [r for r, flag in enumerate(flags) if flag and r not in told]:
                    told.add(row)
                    on_done(row, cut(out[row, :i].tolist()))
        run()
    return [cut(row) for row in out.tolist()]


def _captured(step, *state: torch.Tensor):
    """`step` as a CUDA graph (its state tensors are restored after the capture's warm-up runs)."""
    saved = [t.clone() for t in state]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()  # warm-up: allocations and lazy initialisation outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for t, s in zip(state, saved):
        t.copy_(s)
    return graph.replay


def complete_chats(model, tokenizer, chats: list[list[dict]], max_new_tokens: int, temperature: float = 0.0,
                   batch: int = 32) -> list[str]:
    """The model's answer to each chat prompt (greedy at temperature 0), in batches: this
    sampler where it `supports` the model, else transformers' `generate`."""
    texts = [tokenizer.apply_chat_template(c, add_generation_prompt=True, tokenize=False) for c in chats]
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    # every end of sequence the model's generation config knows, as TRL and generate stop at
    config_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    eos = sorted({tokenizer.eos_token_id, *(config_eos if isinstance(config_eos, list) else [config_eos])} - {None})
    fast = supports(model)
    was_training = model.training
    model.eval()
    answers = []
    try:
        for start in range(0, len(ids), batch):
            chunk = ids[start:start + batch]
            if fast:
                out = sample(model, chunk, max_new_tokens, temperature, eos, pad)
            else:
                out = _generate(model, chunk, max_new_tokens, temperature, pad)
            answers += tokenizer.batch_decode(out, skip_special_tokens=True)
    finally:
        model.train(was_training)
    return answers


@torch.no_grad()
def _generate(model, prompts: list[list[int]], max_new_tokens: int, temperature: float, pad: int) -> list[list[int]]:
    longest = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (longest - len(p)) + p for p in prompts], device=model.device)
    mask = torch.tensor([[0] * (longest - len(p)) + [1] * len(p) for p in prompts], device=model.device)
    kwargs = {"do_sample": True, "temperature": temperature} if temperature > 0 else {"do_sample": False}
    out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens, pad_token_id=pad, **kwargs)
    return out[:, longest:].tolist()
