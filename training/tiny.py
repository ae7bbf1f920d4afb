"""A tiny causal language model built from scratch: the `tiny` recipe's model, and what tests
use wherever a real checkpoint would be (no weights can be downloaded).

A byte-level BPE tokenizer is trained on the given texts, wrapped as a transformers fast
tokenizer with a chat template, and paired with a small randomly initialised Qwen2 model; both
are saved with `save_pretrained`, so everything that loads checkpoints loads this one.
"""

from __future__ import annotations

from pathlib import Path

SPECIAL = ["<|endoftext|>", "<|pad|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tokenizer(texts: list[str], vocab_size: int = 2048):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    # the end of the assistant's turn ends generation, as in Qwen's chat models (else a model
    # trained on chats writes on past its answer until max_new_tokens)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|pad|>",
                                   bos_token=None, unk_token=None)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_model(out: str | Path, texts: list[str], vocab_size: int = 2048, hidden: int = 64,
                     layers: int = 2, heads: int = 4, seed: int = 0) -> Path:
    """Write a tokenizer and a randomly initialised Qwen2-style model to `out`."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    out = Path(out)
    tokenizer = build_tokenizer(texts, vocab_size)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=hidden * 4,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                         max_position_embeddings=8192, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def corpus_from_package(limit_chars: int = 400_000) -> list[str]:
    """Python sources of drtriton itself: enough Python and Triton to train a tokenizer on."""
    root = Path(__file__).resolve().parents[1] / "drtriton"
    texts, total = [], 0
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        texts.append(text)
        total += len(text)
        if total > limit_chars:
            break
    return texts
