# Sourced by the H200 scripts that train at Qwen2.5-VL-3B's shape with Qwen's 151,936-row
# vocabulary: sets MODEL and makes it once (make_3b_shaped.py); needs OUT and H set.
MODEL=/tmp/qwen3b-shaped-vocab
[ -f $MODEL/config.json ] || python3 $H/make_3b_shaped.py test/fixtures/qwen2_5_vl_tiny $MODEL 151936 > "$OUT/make-model.log" 2>&1 || { cat "$OUT/make-model.log"; exit 1; }
