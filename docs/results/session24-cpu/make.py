"""Problem files for transformers architectures outside the corpus: small configs, or with FULL=1
the larger GPU sizes (4 layers, hidden 512, 8 x 256 tokens; images 8 x 224 x 224)."""
import textwrap, sys
from pathlib import Path
import os
FULL = os.environ.get("FULL") == "1"
TEXT = "[torch.randint(0, 128, (8, 256))]" if FULL else "[torch.randint(0, 128, (2, 8))]"
IMG = "[torch.randn(8, 3, 224, 224)]" if FULL else "[torch.randn(2, 3, 32, 32)]"
AUDIO = "[torch.randn(2, 800)]"
DEC = dict(vocab_size=128, hidden_size=512, intermediate_size=1408, num_hidden_layers=4, num_attention_heads=8) if FULL else dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)
SPECS = {
 "phi": ("PhiConfig", "PhiModel", dict(DEC, max_position_embeddings=64), TEXT, "last_hidden_state"),
 "phi3": ("Phi3Config", "Phi3Model", dict(DEC, num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0), TEXT, "last_hidden_state"),
 "gemma": ("GemmaConfig", "GemmaModel", dict(DEC, num_key_value_heads=2, head_dim=8, max_position_embeddings=64), TEXT, "last_hidden_state"),
 "gemma2": ("Gemma2Config", "Gemma2Model", dict(DEC, num_key_value_heads=2, head_dim=8, max_position_embeddings=64, sliding_window=4), TEXT, "last_hidden_state"),
 "qwen3": ("Qwen3Config", "Qwen3Model", dict(DEC, num_key_value_heads=2, head_dim=8, max_position_embeddings=64), TEXT, "last_hidden_state"),
 "falcon": ("FalconConfig", "FalconModel", dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4), TEXT, "last_hidden_state"),
 "opt": ("OPTConfig", "OPTModel", dict(vocab_size=128, hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4, word_embed_proj_dim=32, max_position_embeddings=64), TEXT, "last_hidden_state"),
 "bloom": ("BloomConfig", "BloomModel", dict(vocab_size=128, hidden_size=32, n_layer=2, n_head=4), TEXT, "last_hidden_state"),
 "gpt_neox": ("GPTNeoXConfig", "GPTNeoXModel", dict(DEC, max_position_embeddings=64), TEXT, "last_hidden_state"),
 "gptj": ("GPTJConfig", "GPTJModel", dict(vocab_size=128, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64), TEXT, "last_hidden_state"),
 "stablelm": ("StableLmConfig", "StableLmModel", dict(DEC, num_key_value_heads=2, max_position_embeddings=64), TEXT, "last_hidden_state"),
 "distilbert": ("DistilBertConfig", "DistilBertModel", dict(vocab_size=128, dim=32, hidden_dim=64, n_layers=2, n_heads=4, max_position_embeddings=64), TEXT, "last_hidden_state"),
 "roberta": ("RobertaConfig", "RobertaModel", dict(DEC, max_position_embeddings=64), TEXT, "last_hidden_state"),
 "albert": ("AlbertConfig", "AlbertModel", dict(DEC, embedding_size=16, max_position_embeddings=64), TEXT, "last_hidden_state"),
 "electra": ("ElectraConfig", "ElectraModel", dict(DEC, embedding_size=16, max_position_embeddings=64), TEXT, "last_hidden_state"),
 "deberta_v2": ("DebertaV2Config", "DebertaV2Model", dict(DEC, max_position_embeddings=64, relative_attention=True, position_buckets=8, pos_att_type=["p2c", "c2p"]), TEXT, "last_hidden_state"),
 "convnext": ("ConvNextConfig", "ConvNextModel", dict(num_channels=3, hidden_sizes=[8, 16, 24, 32], depths=[1, 1, 1, 1]), IMG, "last_hidden_state"),
 "clip_vision": ("CLIPVisionConfig", "CLIPVisionModel", dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, image_size=32, patch_size=8), IMG, "last_hidden_state"),
 "siglip_vision": ("SiglipVisionConfig", "SiglipVisionModel", dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, image_size=32, patch_size=8), IMG, "last_hidden_state"),
 "swin": ("SwinConfig", "SwinModel", dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 4], window_size=4), IMG, "last_hidden_state"),
 "segformer": ("SegformerConfig", "SegformerModel", dict(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16], num_attention_heads=[1, 2], patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2]), IMG, "last_hidden_state"),
 "resnet_hf": ("ResNetConfig", "ResNetModel", dict(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="bottleneck"), IMG, "last_hidden_state"),
 "mobilenet_v2_hf": ("MobileNetV2Config", "MobileNetV2Model", dict(image_size=32, depth_multiplier=0.25), IMG, "last_hidden_state"),
 "mamba": ("MambaConfig", "MambaModel", dict(vocab_size=128, hidden_size=32, state_size=4, num_hidden_layers=2, expand=2, conv_kernel=4), TEXT, "last_hidden_state"),
 "wav2vec2": ("Wav2Vec2Config", "Wav2Vec2Model", dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=4, do_stable_layer_norm=True, feat_extract_norm="layer"), AUDIO, "last_hidden_state"),
 "bart_encoder": ("BartConfig", "BartModel", dict(vocab_size=128, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64), TEXT, "last_hidden_state"),
}
out = Path(sys.argv[1]); out.mkdir(exist_ok=True)
if FULL:
    for name, spec in SPECS.items():
        kw = spec[2]
        kw.pop("head_dim", None)
        if "max_position_embeddings" in kw: kw["max_position_embeddings"] = 512
    SPECS["opt"][2].update(hidden_size=512, ffn_dim=1408, num_hidden_layers=4, num_attention_heads=8, word_embed_proj_dim=512)
    SPECS["convnext"][2].update(hidden_sizes=[96, 192, 384, 768], depths=[1, 1, 3, 1])
    SPECS["clip_vision"][2].update(hidden_size=512, intermediate_size=1408, num_hidden_layers=4, num_attention_heads=8, image_size=224, patch_size=16)
    SPECS["deberta_v2"][2].update(position_buckets=64)
    SPECS["siglip_vision"][2].update(hidden_size=512, intermediate_size=1408, num_hidden_layers=4, num_attention_heads=8, image_size=224, patch_size=16)
    SPECS["resnet_hf"][2].update(embedding_size=64, hidden_sizes=[256, 512, 1024], depths=[2, 2, 2])
    SPECS["bloom"][2].update(hidden_size=512, n_layer=4, n_head=8)
    SPECS["falcon"][2].update(hidden_size=512, num_hidden_layers=4, num_attention_heads=8)
for name, (cfg, cls, kw, inputs, attr) in SPECS.items():
    call = "self.model(input_ids=x)" if inputs == TEXT else ("self.model(pixel_values=x)" if inputs == IMG else "self.model(x)")
    if name == "bart_encoder":
        call = "self.model.encoder(input_ids=x)"
    extra = ", attn_implementation=\"eager\"" if name not in ("convnext", "resnet_hf", "mobilenet_v2_hf", "mamba", "segformer") else ""
    src = f'''"""transformers' {cls} from a small {cfg} (a sweep outside the corpus)."""

import torch
import torch.nn as nn
from transformers import {cfg}, {cls}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = {cfg}(**{kw!r}{extra})
        self.model = {cls}(config)
        self.model.eval()

    def forward(self, x):
        return {call}.{attr}


def get_inputs():
    return {inputs}


def get_init_inputs():
    return []
'''
    (out / f"{name}.py").write_text(src)
print(len(SPECS))
