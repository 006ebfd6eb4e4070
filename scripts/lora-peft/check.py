#!/usr/bin/env python3
"""
The PEFT half of the LoRA check (by hand, not in CI): loads what scripts/lora-peft/make.ts
wrote under OUT, the adapter folder with PEFT over the base model and the merged folder
with transformers, and prints max |difference| / max |vagen's logits| against vagen's
base + adapter logits (f32, CPU, TF32 off).

    python3 scripts/lora-peft/check.py OUT
"""
import json
import os
import sys

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

torch.backends.cuda.matmul.allow_tf32 = False
out = sys.argv[1]
fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "test", "fixtures")
for name, auto in [("qwen3", AutoModelForCausalLM)] + [(n, AutoModelForImageTextToText) for n in ("qwen25vl", "qwen3vl", "internvl", "glm4v")]:
    root = f"{out}/{name}"
    ref = json.load(open(f"{root}/logits.json"))
    ids = torch.tensor(ref["ids"])
    want = torch.tensor(ref["logits"]).view(1, ids.shape[1], -1)
    want_base = torch.tensor(ref["base_logits"]).view_as(want)
    scale = want.abs().max().item()

    def logits(model):
        with torch.no_grad():
            return model(input_ids=ids).logits.float()

    def rel(a, b):
        return ((a - b).abs().max() / scale).item()

    base = auto.from_pretrained(os.path.join(fixtures, ref["fixture"]), dtype=torch.float32).eval()
    print(f"{name}: transformers base vs vagen base {rel(logits(base), want_base):.2e}")
    peft = PeftModel.from_pretrained(base, f"{root}/peft").eval()
    adapted = sum(1 for k, _ in peft.named_modules() if k.endswith("lora_A"))
    print(f"{name}: PEFT adapter vs vagen base + adapter {rel(logits(peft), want):.2e} ({adapted} adapted modules; the adapter moves logits by {rel(want, want_base):.2e})")
    merged = auto.from_pretrained(f"{root}/merged", dtype=torch.float32).eval()
    print(f"{name}: transformers merged vs vagen base + adapter {rel(logits(merged), want):.2e}")
