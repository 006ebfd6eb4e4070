#!/usr/bin/env python3
"""
transformers' side of vagen's engine benchmark (bench/engine.ts).

1. Builds Qwen2_5_VLForConditionalGeneration from the published Qwen2.5-VL-3B-Instruct
   configuration with random weights (fixed seed, bfloat16, on the GPU) and saves it as a
   model directory vagen can load (safetensors + the tiny fixture's tokenizer, chat
   template and image processor config: random weights make the real vocabulary moot,
   and the model keeps the full 151,936-entry embedding).
2. Times `generate` (greedy, KV cache, fixed length: min_new_tokens = max_new_tokens) at
   several batch sizes, and a prefill forward, on the same weights vagen then loads.

Writes DIR (the model) and a JSON file of timings.

Run: python3 bench/python/engine_reference.py --out /tmp/q3b --json results/hf.json
"""
import argparse
import json
import os
import shutil
import sys
import time

import torch
import transformers
from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "..", "test", "fixtures", "qwen2_5_vl_tiny")
sys.path.insert(0, FIXTURE)
from make_fixture import QWEN25_VL_3B_CONFIG  # noqa: E402  (the published 3B config, one copy in the repo)

SEED = 1234
# Prompt token ids are drawn below this bound: ordinary text ids, clear of the special ids.
TEXT_ID_BOUND = 150000


def log(msg):
    print(f"[engine_reference] {msg}", flush=True)


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def build_model(out_dir):
    torch.manual_seed(SEED)
    config = Qwen2_5_VLConfig(**QWEN25_VL_3B_CONFIG)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = Qwen2_5_VLForConditionalGeneration(config)
    torch.set_default_dtype(torch.float32)
    model = model.to(torch.bfloat16).eval()
    _, t_save = timed(lambda: model.save_pretrained(out_dir, safe_serialization=True, max_shard_size="4GB"))
    for name in ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "preprocessor_config.json", "generation_config.json"]:
        src = os.path.join(FIXTURE, name)
        if os.path.exists(src):
            shutil.copy(src, os.path.join(out_dir, name))
    params = sum(p.numel() for p in model.parameters())
    log(f"built and saved {params / 1e9:.3f}B parameters in {t_save:.1f}s")
    return model, params


def prompt_ids(batch, length, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, TEXT_ID_BOUND, (batch, length), generator=g).cuda()


def bench_generate(model, batch, prompt_len, new_tokens):
    ids = prompt_ids(batch, prompt_len, SEED + batch)
    mask = torch.ones_like(ids)
    kwargs = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, use_cache=True,
                  pad_token_id=0)
    with torch.no_grad():
        model.generate(input_ids=ids[:, :16], attention_mask=mask[:, :16], max_new_tokens=4, min_new_tokens=4,
                       do_sample=False, pad_token_id=0)  # warm-up
        out, t_total = timed(lambda: model.generate(input_ids=ids, attention_mask=mask, **kwargs))
        _, t_prefill = timed(lambda: model(input_ids=ids, attention_mask=mask, use_cache=True))
    generated = out.shape[1] - prompt_len
    decode_s = max(t_total - t_prefill, 1e-9)
    return {
        "batch": batch,
        "prompt_len": prompt_len,
        "new_tokens": generated,
        "total_s": t_total,
        "prefill_s": t_prefill,
        "tokens_per_s": batch * generated / t_total,
        "decode_tokens_per_s": batch * (generated - 1) / decode_s,
    }


def bench_prefill(model, batch, length):
    ids = prompt_ids(batch, length, SEED)
    with torch.no_grad():
        model(input_ids=ids[:, :64])
        _, t = timed(lambda: model(input_ids=ids, use_cache=False, logits_to_keep=1))
    return {"batch": batch, "prompt_len": length, "seconds": t, "tokens_per_s": batch * length / t}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="model directory to write")
    ap.add_argument("--json", required=True, help="timings file to write")
    ap.add_argument("--batches", default="1,16,64,256")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--prefill-batch", type=int, default=8)
    ap.add_argument("--prefill-len", type=int, default=1024)
    ap.add_argument("--save-only", action="store_true", help="write the model directory, time nothing")
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    model, params = build_model(args.out)
    if args.save_only:
        return
    results = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0),
        "params": params,
        "generate": [],
    }
    for b in [int(x) for x in args.batches.split(",")]:
        r = bench_generate(model, b, args.prompt_len, args.new_tokens)
        log(f"generate batch {b}: {r['decode_tokens_per_s']:.0f} decode tok/s ({r['total_s']:.2f}s total)")
        results["generate"].append(r)
    results["prefill"] = bench_prefill(model, args.prefill_batch, args.prefill_len)
    log(f"prefill {args.prefill_batch}x{args.prefill_len}: {results['prefill']['tokens_per_s']:.0f} tok/s")
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
