"""tensorboard's own reader on a vagen run's event files. Usage: python3 check_tensorboard.py LOGDIR"""
import sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

acc = EventAccumulator(sys.argv[1])
acc.Reload()
tags = acc.Tags()["scalars"]
print(f"tensorboard check: {len(tags)} scalar tags, e.g. " + ", ".join(sorted(tags)[:4]))
for tag in ("actor/pg_loss", "critic/score/mean"):
    print(tag, [(e.step, round(e.value, 6)) for e in acc.Scalars(tag)])
sys.exit(0 if "actor/pg_loss" in tags else 1)
