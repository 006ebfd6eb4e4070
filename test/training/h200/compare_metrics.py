"""One data-parallel variant's metrics.jsonl against the plain run's: the worst relative
difference of every metric (wall-clock and per-rank entries left out) at each step, and
the update's actor tokens per rank. Usage: python3 compare_metrics.py PLAIN_DIR RUN_DIR LABEL"""
import json
import sys

plain_dir, run_dir, label = sys.argv[1:4]
load = lambda d: [json.loads(line) for line in open(f"{d}/metrics.jsonl")]
a, b = load(plain_dir), load(run_dir)
keys = [k for k in a[0] if not k.startswith(("timing_s/", "perf/"))]
worst = [max(abs(x[k] - y[k]) / max(1, abs(x[k])) for k in keys if k in y) for x, y in zip(a, b)]
tokens = f"{b[0].get('perf/actor_tokens_rank_min')}-{b[0].get('perf/actor_tokens_rank_max')}"
print(f"{label}: {len(b)} steps, actor tokens per rank {tokens}, worst metric difference per step against the plain run {[f'{w:.1e}' for w in worst]}")
