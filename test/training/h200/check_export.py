"""transformers' logits on an exported vagen model equal vagen's (the JSON vagen wrote); any family vagen exports.
Usage: python3 check_export.py MODEL_DIR VAGEN_LOGITS_JSON"""
import json, sys
import torch
from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

model_dir, ref = sys.argv[1], json.load(open(sys.argv[2]))
model_type = json.load(open(f"{model_dir}/config.json"))["model_type"]
auto = AutoModelForCausalLM if model_type == "qwen3" else AutoModelForImageTextToText
model = auto.from_pretrained(model_dir, dtype=torch.float32).eval()
with torch.no_grad():
    logits = model(input_ids=torch.tensor([ref["ids"]])).logits[0].float()
vagen = torch.tensor(ref["logits"])
err = ((logits - vagen).abs().max() / logits.abs().max()).item()
print(f"export check: max relative logit error transformers vs vagen = {err:.3e}")
sys.exit(0 if err < 1e-4 else 1)
