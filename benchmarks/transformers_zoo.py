"""Problem files for transformers models outside corpus/ (nobody here wrote them), each built from
a small config with random weights, eager attention and no dropout: a quick check of capture and
the built-in policy on real architectures (CPU-sized; the models come from the installed
transformers, so the set follows its version).

    python benchmarks/transformers_zoo.py --out /tmp/zoo
    drtriton bench /tmp/zoo --policy builtin --mode strict --budget 90 --workers 2 --device cpu
"""

from __future__ import annotations

import argparse
from pathlib import Path

TEXT = "torch.randint(2, 128, (2, 8))"
IMAGE = "torch.randn(2, 3, 32, 32)"
SMALL = "vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4"

#: name -> (config class, model class, config arguments, input, forward's keyword arguments)
MODELS = {
    "albert": ("AlbertConfig", "AlbertModel", f"{SMALL}, embedding_size=16, max_position_embeddings=64", TEXT, "input_ids=x"),
    "bart": ("BartConfig", "BartModel", "vocab_size=128, d_model=32, encoder_layers=2, decoder_layers=2, "
             "encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, "
             "max_position_embeddings=64", TEXT, "input_ids=x"),
    "bloom": ("BloomConfig", "BloomModel", "vocab_size=128, hidden_size=32, n_layer=2, n_head=4", TEXT, "input_ids=x"),
    "clip_text": ("CLIPTextConfig", "CLIPTextModel", f"{SMALL}, max_position_embeddings=64", TEXT, "input_ids=x"),
    "convnext": ("ConvNextConfig", "ConvNextModel", "hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], image_size=32",
                 IMAGE, "pixel_values=x"),
    "deberta_v2": ("DebertaV2Config", "DebertaV2Model", f"{SMALL}, max_position_embeddings=64, relative_attention=True, "
                   "position_buckets=8, pos_att_type=['p2c', 'c2p']", TEXT, "input_ids=x"),
    "dinov2": ("Dinov2Config", "Dinov2Model", "image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, "
               "num_attention_heads=4, intermediate_size=64", IMAGE, "pixel_values=x"),
    "distilbert": ("DistilBertConfig", "DistilBertModel", "vocab_size=128, dim=32, n_layers=2, n_heads=4, hidden_dim=64, "
                   "max_position_embeddings=64", TEXT, "input_ids=x"),
    "electra": ("ElectraConfig", "ElectraModel", f"{SMALL}, embedding_size=16, max_position_embeddings=64", TEXT, "input_ids=x"),
    "falcon": ("FalconConfig", "FalconModel", "vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, "
               "new_decoder_architecture=True, num_kv_heads=2", TEXT, "input_ids=x"),
    "gemma": ("GemmaConfig", "GemmaModel", f"{SMALL}, num_key_value_heads=2, head_dim=8, max_position_embeddings=64",
              TEXT, "input_ids=x"),
    "gpt_bigcode": ("GPTBigCodeConfig", "GPTBigCodeModel", "vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=64, "
                    "multi_query=True", TEXT, "input_ids=x"),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXModel", f"{SMALL}, max_position_embeddings=64", TEXT, "input_ids=x"),
    "mamba": ("MambaConfig", "MambaModel", "vocab_size=128, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2, "
              "conv_kernel=4", TEXT, "input_ids=x"),
    "mixtral": ("MixtralConfig", "MixtralModel", f"{SMALL}, num_key_value_heads=2, num_local_experts=4, "
                "num_experts_per_tok=2, max_position_embeddings=64", TEXT, "input_ids=x"),
    "mobilebert": ("MobileBertConfig", "MobileBertModel", f"{SMALL}, embedding_size=16, intra_bottleneck_size=16, "
                   "true_hidden_size=16, num_feedforward_networks=2, max_position_embeddings=64", TEXT, "input_ids=x"),
    "opt": ("OPTConfig", "OPTModel", "vocab_size=128, hidden_size=32, ffn_dim=64, num_hidden_layers=2, "
            "num_attention_heads=4, max_position_embeddings=64, word_embed_proj_dim=32", TEXT, "input_ids=x"),
    "phi": ("PhiConfig", "PhiModel", f"{SMALL}, max_position_embeddings=64, partial_rotary_factor=0.5", TEXT, "input_ids=x"),
    "phi3": ("Phi3Config", "Phi3Model", f"{SMALL}, num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0",
             TEXT, "input_ids=x"),
    "qwen3": ("Qwen3Config", "Qwen3Model", f"{SMALL}, num_key_value_heads=2, head_dim=8, max_position_embeddings=64",
              TEXT, "input_ids=x"),
    "roberta": ("RobertaConfig", "RobertaModel", f"{SMALL}, max_position_embeddings=64, pad_token_id=1", TEXT, "input_ids=x"),
    "segformer": ("SegformerConfig", "SegformerModel", "num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], "
                  "hidden_sizes=[16, 32], patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], "
                  "mlp_ratios=[2, 2]", IMAGE, "pixel_values=x"),
    "starcoder2": ("Starcoder2Config", "Starcoder2Model", f"{SMALL}, num_key_value_heads=2, max_position_embeddings=64",
                   TEXT, "input_ids=x"),
    "swin": ("SwinConfig", "SwinModel", "image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 4], "
             "window_size=4", IMAGE, "pixel_values=x"),
    "t5": ("T5Config", "T5Model", "vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, "
           "relative_attention_num_buckets=8", TEXT, "input_ids=x, decoder_input_ids=x"),
    "wav2vec2": ("Wav2Vec2Config", "Wav2Vec2Model", "hidden_size=32, num_hidden_layers=2, num_attention_heads=4, "
                 "intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), "
                 "num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, do_stable_layer_norm=True",
                 "torch.randn(2, 400)", "input_values=x"),
    "xlm_roberta": ("XLMRobertaConfig", "XLMRobertaModel", f"{SMALL}, max_position_embeddings=64, pad_token_id=1",
                    TEXT, "input_ids=x"),
    # the second set (session 33): mixtures of experts, more decoders, vision encoders, an RNN-style LM
    "beit": ("BeitConfig", "BeitModel", "image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, "
             "num_attention_heads=4, intermediate_size=64, use_relative_position_bias=True", IMAGE, "pixel_values=x"),
    "biogpt": ("BioGptConfig", "BioGptModel", f"{SMALL}, max_position_embeddings=64", TEXT, "input_ids=x"),
    "codegen": ("CodeGenConfig", "CodeGenModel", "vocab_size=128, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, "
                "n_positions=64, n_ctx=64", TEXT, "input_ids=x"),
    "cohere": ("CohereConfig", "CohereModel", f"{SMALL}, num_key_value_heads=2, max_position_embeddings=64", TEXT,
               "input_ids=x"),
    "deit": ("DeiTConfig", "DeiTModel", "image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, "
             "num_attention_heads=4, intermediate_size=64", IMAGE, "pixel_values=x"),
    "gemma2": ("Gemma2Config", "Gemma2Model", f"{SMALL}, num_key_value_heads=2, head_dim=8, max_position_embeddings=64",
               TEXT, "input_ids=x"),
    "gptj": ("GPTJConfig", "GPTJModel", "vocab_size=128, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64",
             TEXT, "input_ids=x"),
    "granite": ("GraniteConfig", "GraniteModel", f"{SMALL}, num_key_value_heads=2, max_position_embeddings=64", TEXT,
                "input_ids=x"),
    "modernbert": ("ModernBertConfig", "ModernBertModel", f"{SMALL}, max_position_embeddings=64, pad_token_id=0, "
                   "bos_token_id=1, eos_token_id=2, sep_token_id=2, cls_token_id=1", TEXT, "input_ids=x"),
    "mpt": ("MptConfig", "MptModel", "vocab_size=128, d_model=32, n_heads=4, n_layers=2, max_seq_len=64", TEXT,
            "input_ids=x"),
    "nemotron": ("NemotronConfig", "NemotronModel", f"{SMALL}, num_key_value_heads=2, max_position_embeddings=64", TEXT,
                 "input_ids=x"),
    "olmo2": ("Olmo2Config", "Olmo2Model", f"{SMALL}, num_key_value_heads=2, max_position_embeddings=64", TEXT,
              "input_ids=x"),
    "olmoe": ("OlmoeConfig", "OlmoeModel", f"{SMALL}, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, "
              "max_position_embeddings=64", TEXT, "input_ids=x"),
    "pegasus": ("PegasusConfig", "PegasusModel", "vocab_size=128, d_model=32, encoder_layers=2, decoder_layers=2, "
                "encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, "
                "max_position_embeddings=64", TEXT, "input_ids=x, decoder_input_ids=x"),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeModel", f"{SMALL}, num_key_value_heads=2, moe_intermediate_size=16, "
                  "shared_expert_intermediate_size=32, num_experts=4, num_experts_per_tok=2, max_position_embeddings=64",
                  TEXT, "input_ids=x"),
    "resnet": ("ResNetConfig", "ResNetModel", "embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type='basic'",
               IMAGE, "pixel_values=x"),
    "rwkv": ("RwkvConfig", "RwkvModel", "vocab_size=128, hidden_size=32, num_hidden_layers=2, attention_hidden_size=32, "
             "intermediate_size=64, context_length=64", TEXT, "input_ids=x"),
    "stablelm": ("StableLmConfig", "StableLmModel", f"{SMALL}, num_key_value_heads=2, max_position_embeddings=64", TEXT,
                 "input_ids=x"),
    "xglm": ("XGLMConfig", "XGLMModel", "vocab_size=128, d_model=32, ffn_dim=64, num_layers=2, attention_heads=4, "
             "max_position_embeddings=64", TEXT, "input_ids=x"),
}

TEMPLATE = '''"""{model} from a small {config}, random weights (transformers; benchmarks/transformers_zoo.py)."""
import torch
import torch.nn as nn
from transformers import {config}, {model}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = {config}({kwargs}, attn_implementation="eager")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "dropout", "attention_dropout",
                     "hidden_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop", "activation_dropout"):
            if hasattr(config, name):
                setattr(config, name, 0.0)
        self.model = {model}(config)
        self.model.eval()

    def forward(self, x):
        return self.model({call}).last_hidden_state


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the folder the problem files go to")
    ap.add_argument("--only", help="comma-separated names")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(MODELS)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in names:
        config, model, kwargs, inputs, call = MODELS[name]
        (args.out / f"{name}.py").write_text(TEMPLATE.format(config=config, model=model, kwargs=kwargs,
                                                             inputs=inputs, call=call))
    print(f"{len(names)} problems in {args.out}")


if __name__ == "__main__":
    main()
