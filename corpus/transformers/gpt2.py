"""GPT-2 (transformers' GPT2Model, OpenAI's GPT-2 architecture) built from a small GPT2Config with random weights; returns last_hidden_state."""

import torch
import torch.nn as nn
from transformers import GPT2Config, GPT2Model

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
B, T, VOCAB, D, LAYERS, HEADS = {"small": (2, 8, 128, 32, 2, 4), "full": (8, 512, 50257, 768, 12, 12)}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = GPT2Config(vocab_size=VOCAB, n_positions=max(T, 64), n_embd=D, n_layer=LAYERS, n_head=HEADS,
                            bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False,
                            attn_implementation="eager")
        self.model = GPT2Model(config)
        self.model.eval()

    def forward(self, input_ids):
        return self.model(input_ids=input_ids).last_hidden_state


def get_inputs():
    return [torch.randint(0, VOCAB, (B, T))]


def get_init_inputs():
    return []
