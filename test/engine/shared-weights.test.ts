/**
 * An engine over a model someone else owns (a trainer, later): it reads the model's own
 * weight tensors, closing it leaves the model usable, and an in-place weight update is
 * seen by the next request.
 */
import { expect, test } from "bun:test";
import { createEngine } from "../../src/engine/load.ts";
import { Qwen25VLChatModel } from "../../src/models/qwen2_5_vl/chat-model.ts";
import * as torch from "../../src/torch/index.ts";
import { FIXTURE_DIR, refsJson } from "../models/fixture.ts";

test("createEngine shares the caller's weights and leaves them with the caller", async () => {
  const ledger = torch.tensorLedger();
  const chat = Qwen25VLChatModel.load(FIXTURE_DIR, { device: "cpu", dtype: "f32" });
  const withModel = ledger.leaked();
  const ids = refsJson().cases.text!.input_ids!;
  const prompt = { tokenIds: [...ids], images: [] };
  const greedy = async () => {
    const engine = createEngine(chat, { max_seq_len: 256, kv_cache_gib: 0.01, max_slots: 2 });
    try {
      const r = await engine.engine.generate({ prompt: prompt, sampling: { temperature: 0, maxNewTokens: 4, ignoreStopTokens: true } });
      return r.tokenIds;
    } finally {
      await engine.close();
    }
  };
  const first = await greedy();
  expect(first).toEqual(refsJson().cases.text!.greedy!.slice(0, 4));
  // The engine is gone, the model is not.
  expect(ledger.leaked()).toBe(withModel);

  // Zero the LM head in place (the fixture ties it to the embeddings): every logit
  // becomes 0, so greedy picks token 0 -- visible to a new engine over the same model.
  torch.noGrad(() => {
    for (const [name, w] of chat.model.weights) if (name.endsWith("embed_tokens.weight") || name === "lm_head.weight") w.mul_(0);
  });
  expect(await greedy()).toEqual([0, 0, 0, 0]);

  chat.dispose();
  expect(ledger.leaked()).toBe(0);
});
