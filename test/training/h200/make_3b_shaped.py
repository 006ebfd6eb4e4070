"""A Qwen2.5-VL-3B-shaped model with random weights, for the H200 training run.

Every layer has Qwen2.5-VL-3B-Instruct's shape (36 decoder layers of width 2048, 16/2
heads, MLP 11008; a 32-block vision tower of width 1280); the tokenizer, chat template and
processor config are the tiny test fixture's, so the vocabulary is the fixture's 368 ids
(the embedding and LM head are 368 x 2048 instead of 151936 x 2048) and the embeddings
are untied. A random LM head would sample vision tokens (image pad, vision start/end,
video pad) now and then, and the rollout drops such episodes as VAGEN does; so their rows
are zeroed and the other rows scaled so logits spread with a standard deviation of about
5: a vision token then has a probability around 1e-8 per step. With a third argument VOCAB
(151936 for Qwen's) the embedding and LM head get that many rows, as the real model's: the
rows past the fixture's ids are zero (the tokenizer decodes such an id to nothing, should one
be sampled). Usage: python3 make_3b_shaped.py FIXTURE_DIR OUT_DIR [VOCAB]
"""
import json, shutil, sys
from pathlib import Path

import torch
from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

fixture, out = Path(sys.argv[1]), Path(sys.argv[2])
cfg = json.loads((fixture / "config.json").read_text())
fixture_vocab = cfg["text_config"]["vocab_size"]
vocab = int(sys.argv[3]) if len(sys.argv) > 3 else fixture_vocab
cfg["text_config"]["vocab_size"] = vocab
if "vocab_size" in cfg:
    cfg["vocab_size"] = vocab
cfg["text_config"].update(hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16,
                          num_key_value_heads=2, max_position_embeddings=128000, layer_types=["full_attention"] * 36)
cfg["text_config"]["rope_parameters"].update(rope_theta=1000000.0, mrope_section=[16, 24, 24])
cfg["vision_config"].update(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=2048,
                            fullatt_block_indexes=[7, 15, 23, 31])
cfg["dtype"] = "bfloat16"
out.mkdir(parents=True, exist_ok=True)
for f in fixture.iterdir():
    if f.is_file() and not f.name.endswith(".safetensors") and f.name not in ("config.json", "refs.json", "make_fixture.py"):
        shutil.copy(f, out / f.name)
config = Qwen2_5_VLConfig.from_dict(cfg)
torch.manual_seed(0)
with torch.device("cuda"):
    model = Qwen2_5_VLForConditionalGeneration(config).to(torch.bfloat16)
with torch.no_grad():
    head = model.lm_head.weight
    head.mul_(6.0)
    head[fixture_vocab:].zero_()
    model.get_input_embeddings().weight[fixture_vocab:].zero_()
    added = json.loads((fixture / "tokenizer.json").read_text())["added_tokens"]
    ids = {t["content"]: t["id"] for t in added}
    for name in ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>"):
        head[ids[name]].zero_()
model.save_pretrained(out, safe_serialization=True)
print("params", sum(p.numel() for p in model.parameters()) / 1e9, "B")
