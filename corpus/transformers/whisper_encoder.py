"""Whisper encoder (transformers' WhisperEncoder, the encoder half of WhisperModel, OpenAI's Whisper: two GELU Conv1d layers over log-mel features, sinusoidal positions, pre-norm layers) built from a small WhisperConfig with random weights; returns last_hidden_state."""

import torch
import torch.nn as nn
from transformers import WhisperConfig
from transformers.models.whisper.modeling_whisper import WhisperEncoder

SIZE = "small"  # "full": realistic GPU sizes (benchmarks/corpus_gpu.sh switches a copy)
# FRAMES is the mel input length; the encoder halves it (conv2 has stride 2) into max_source_positions.
B, MELS, FRAMES, D, FF, LAYERS, HEADS = {
    "small": (2, 8, 16, 32, 64, 2, 4),
    "full": (8, 80, 3000, 384, 1536, 4, 6),
}[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = WhisperConfig(vocab_size=128, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                               decoder_start_token_id=1, num_mel_bins=MELS, d_model=D,
                               encoder_layers=LAYERS, encoder_attention_heads=HEADS, encoder_ffn_dim=FF,
                               decoder_layers=1, decoder_attention_heads=HEADS, decoder_ffn_dim=FF,
                               max_source_positions=FRAMES // 2, max_target_positions=64,
                               dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                               use_cache=False, attn_implementation="eager")
        self.encoder = WhisperEncoder(config)
        self.encoder.eval()

    def forward(self, input_features):
        return self.encoder(input_features=input_features).last_hidden_state


def get_inputs():
    return [torch.randn(B, MELS, FRAMES)]


def get_init_inputs():
    return []
