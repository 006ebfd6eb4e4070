import { beforeEach, describe, expect, test } from "bun:test";
import { Engine } from "../../src/engine/engine.ts";
import type { GenerationResult, Prompt } from "../../src/engine/types.ts";
import { FakeRunner, letters } from "./fake-runner.ts";

const prompt = (...ids: number[]): Prompt => ({ tokenIds: ids, images: [] });
const greedy = (maxNewTokens: number) => ({ temperature: 0, maxNewTokens });

// Every suite runs twice: decode steps one at a time, and overlapped (the runner offers
// launchDecode, so step k + 1 is queued before step k's tokens are read).
let overlap = false;

function engine(slots = 4, slotTokens = 64, opts: { maxPrefillTokens?: number; eos?: number[]; prefillMaxWaitSteps?: number; prefillWaitRatio?: number } = {}) {
  const runner = new FakeRunner(slots, slotTokens, 50, overlap);
  const e = new Engine(runner, {
    decode: letters,
    eosTokenIds: opts.eos ?? [],
    maxPrefillTokens: opts.maxPrefillTokens,
    prefillMaxWaitSteps: opts.prefillMaxWaitSteps,
    prefillWaitRatio: opts.prefillWaitRatio,
  });
  return { runner, engine: e };
}

for (const overlapped of [false, true]) {
  const mode = overlapped ? " (overlapped decode)" : "";
  const setMode = () => {
    overlap = overlapped;
  };
  describe(`continuous batching${mode}`, () => {
    beforeEach(setMode);

    test("concurrent requests give the same tokens as one at a time, and share decode steps", async () => {
      const prompts = [prompt(1, 2, 3), prompt(4, 5), prompt(6, 7, 8, 9, 10), prompt(11)];
      const lengths = [5, 9, 3, 7];
      const solo: GenerationResult[] = [];
      for (let i = 0; i < prompts.length; i++) {
        const { engine: e } = engine();
        solo.push(await e.generate({ prompt: prompts[i]!, sampling: greedy(lengths[i]!) }));
        await e.close();
      }
      const { engine: e, runner } = engine();
      const together = await Promise.all(prompts.map((p, i) => e.generate({ prompt: p, sampling: greedy(lengths[i]!) })));
      for (let i = 0; i < prompts.length; i++) {
        expect(together[i]!.tokenIds).toEqual(solo[i]!.tokenIds);
        expect(together[i]!.logprobs).toEqual(solo[i]!.logprobs);
        expect(together[i]!.tokenIds.length).toBe(lengths[i]!);
        expect(together[i]!.finishReason).toBe("length");
      }
      expect(Math.max(...runner.decodeBatchSizes)).toBe(4);
      expect(e.stats().freeSlots).toBe(4);
      // Overlapped: each step was queued before the previous one was read, and none is
      // left behind once every request has finished.
      expect(runner.maxQueued).toBe(overlapped ? 2 : 0);
      expect(runner.pendingSteps).toBe(0);
      await e.close();
    });

    test("a request arriving mid-generation joins the running batch", async () => {
      const { engine: e, runner } = engine();
      const first = e.generate({ prompt: prompt(1, 2), sampling: greedy(30) });
      await new Promise((r) => setImmediate(r));
      await new Promise((r) => setImmediate(r));
      const second = e.generate({ prompt: prompt(3, 4), sampling: greedy(5) });
      await Promise.all([first, second]);
      const joined = runner.decodeBatchSizes.findIndex((b) => b === 2);
      expect(joined).toBeGreaterThan(0); // it started alone, then decoded with the newcomer
      expect(runner.decodeBatchSizes.length).toBeLessThan(30 + 5);
      await e.close();
    });

    test("requests submitted together share the first prefill; the loop restarts cleanly after going idle", async () => {
      const { engine: e, runner } = engine();
      const solo = [];
      for (const p of [prompt(1, 2, 3), prompt(4, 5, 6, 7)]) solo.push(await e.generate({ prompt: p, sampling: greedy(9) }));
      runner.prefillCalls = [];
      // Different lengths: the first finishes while the others keep decoding.
      const [a, b] = await Promise.all([
        e.generate({ prompt: prompt(1, 2, 3), sampling: greedy(3) }),
        e.generate({ prompt: prompt(4, 5, 6, 7), sampling: greedy(9) }),
      ]);
      expect(runner.prefillCalls[0]!.length).toBe(2);
      expect(a.tokenIds).toEqual(solo[0]!.tokenIds.slice(0, 3));
      expect(b.tokenIds).toEqual(solo[1]!.tokenIds);
      await e.close();
    });

    test("more requests than slots wait and all complete", async () => {
      const { engine: e } = engine(2, 32);
      const results = await Promise.all(Array.from({ length: 7 }, (_, i) => e.generate({ prompt: prompt(i + 1, i + 2), sampling: greedy(4) })));
      expect(results.every((r) => r.tokenIds.length === 4)).toBe(true);
      expect(e.stats().freeSlots).toBe(2);
      await e.close();
    });

    test("long prompts are prefilled in chunks within the token budget", async () => {
      const { engine: e, runner } = engine(4, 64, { maxPrefillTokens: 8 });
      const ids = Array.from({ length: 20 }, (_, i) => (i * 7) % 50);
      const chunked = await e.generate({ prompt: prompt(...ids), sampling: greedy(3) });
      expect(runner.prefillCalls.map((c) => c.map((x) => [x.start, x.end]))).toEqual([[[0, 8]], [[8, 16]], [[16, 20]]]);
      const { engine: e2 } = engine(4, 64, { maxPrefillTokens: 1000 });
      expect((await e2.generate({ prompt: prompt(...ids), sampling: greedy(3) })).tokenIds).toEqual(chunked.tokenIds);
      await e.close();
      await e2.close();
    });
  });

  describe(`stopping${mode}`, () => {
    beforeEach(setMode);

    test("stop token ids end generation and are kept in tokenIds but not in text", async () => {
      const { engine: free } = engine();
      const ref = await free.generate({ prompt: prompt(1, 2, 3), sampling: greedy(12) });
      const stopId = ref.tokenIds[4]!;
      const firstAt = ref.tokenIds.indexOf(stopId);
      const { engine: e } = engine(4, 64, { eos: [stopId] });
      const r = await e.generate({ prompt: prompt(1, 2, 3), sampling: greedy(12) });
      expect(r.finishReason).toBe("stop");
      expect(r.stoppedBy).toBe(stopId);
      expect(r.tokenIds).toEqual(ref.tokenIds.slice(0, firstAt + 1));
      expect(r.text).toBe(letters(ref.tokenIds.slice(0, firstAt)));
      const ignored = await e.generate({ prompt: prompt(1, 2, 3), sampling: { ...greedy(12), ignoreStopTokens: true } });
      expect(ignored.tokenIds).toEqual(ref.tokenIds);
      await free.close();
      await e.close();
    });

    test("stop strings cut the text before the match; streamed deltas never show the stop string", async () => {
      const { engine: e } = engine();
      const ref = await e.generate({ prompt: prompt(5, 6), sampling: greedy(16) });
      const stop = ref.text.slice(6, 8);
      const deltas: string[] = [];
      const r = await e.generate({
        prompt: prompt(5, 6),
        sampling: { ...greedy(16), stopStrings: [stop] },
        onToken: (ev) => deltas.push(ev.textDelta),
      });
      const cut = ref.text.indexOf(stop);
      expect(r.finishReason).toBe("stop");
      expect(r.stoppedBy).toBe(stop);
      expect(r.text).toBe(ref.text.slice(0, cut));
      expect(deltas.join("")).toBe(r.text);
      expect(deltas.length).toBe(r.tokenIds.length);
      await e.close();
    });

    test("max new tokens and slot capacity end with 'length'", async () => {
      const { engine: e } = engine(2, 10);
      const r = await e.generate({ prompt: prompt(1, 2, 3), sampling: greedy(100) });
      expect(r.finishReason).toBe("length");
      expect(3 + r.tokenIds.length).toBe(10);
      await expect(e.generate({ prompt: prompt(...Array(10).fill(1)) })).rejects.toThrow(/KV slot holds 10/);
      await e.close();
    });

    test("invalid requests are rejected with the reason", async () => {
      const { engine: e } = engine();
      await expect(e.generate({ prompt: prompt(99) })).rejects.toThrow(/outside the vocabulary/);
      await expect(e.generate({ prompt: prompt(1), sampling: { topP: 0 } })).rejects.toThrow(/topP/);
      await e.close();
    });

    test("an aborted request rejects with AbortError and frees its slot", async () => {
      const { engine: e } = engine(1, 64);
      const ctrl = new AbortController();
      const p = e.generate({ prompt: prompt(1, 2), sampling: greedy(50), signal: ctrl.signal });
      const queued = e.generate({ prompt: prompt(3), sampling: greedy(2) });
      setImmediate(() => ctrl.abort());
      await expect(p).rejects.toMatchObject({ name: "AbortError" });
      expect((await queued).tokenIds.length).toBe(2);
      expect(e.stats().freeSlots).toBe(1);
      await e.close();
    });
  });

  describe(`multi-turn sessions${mode}`, () => {
    beforeEach(setMode);

    test("turn 2 reuses the session's KV and matches a fresh prefill of the whole conversation", async () => {
      const { engine: e, runner } = engine();
      const turn1 = prompt(1, 2, 3, 4);
      const r1 = await e.generate({ prompt: turn1, sampling: greedy(6), sessionId: "ep" });
      expect(r1.cachedPromptTokens).toBe(0);
      const turn2 = prompt(...turn1.tokenIds, ...r1.tokenIds, 7, 8, 9);
      runner.prefillCalls = [];
      const r2 = await e.generate({ prompt: turn2, sampling: greedy(6), sessionId: "ep" });
      // Everything but the last generated token (never fed back) came from the cache.
      expect(r2.cachedPromptTokens).toBe(4 + 6 - 1);
      expect(runner.prefillCalls.flat().reduce((n, c) => n + c.end - c.start, 0)).toBe(turn2.tokenIds.length - 9);
      const { engine: fresh } = engine();
      const ref = await fresh.generate({ prompt: turn2, sampling: greedy(6) });
      expect(r2.tokenIds).toEqual(ref.tokenIds);
      expect(r2.logprobs).toEqual(ref.logprobs);
      await e.close();
      await fresh.close();
    });

    test("a diverging prompt reuses only the shared prefix", async () => {
      const { engine: e } = engine();
      await e.generate({ prompt: prompt(1, 2, 3, 4, 5), sampling: greedy(2), sessionId: "s" });
      const r = await e.generate({ prompt: prompt(1, 2, 9, 9), sampling: greedy(4), sessionId: "s" });
      expect(r.cachedPromptTokens).toBe(2);
      const { engine: fresh } = engine();
      expect(r.tokenIds).toEqual((await fresh.generate({ prompt: prompt(1, 2, 9, 9), sampling: greedy(4) })).tokenIds);
      await e.close();
      await fresh.close();
    });

    test("same token ids but a different image do not reuse the image's KV", async () => {
      const { engine: e } = engine();
      const img = (key: string) => ({ image: { width: 1, height: 1, data: new Uint8Array(3) }, offset: 1, length: 2, key });
      await e.generate({ prompt: { tokenIds: [1, 3, 3, 4], images: [img("a")] }, sampling: greedy(2), sessionId: "s" });
      const r = await e.generate({ prompt: { tokenIds: [1, 3, 3, 4, 5], images: [img("b")] }, sampling: greedy(2), sessionId: "s" });
      expect(r.cachedPromptTokens).toBe(1);
      await e.close();
    });

    test("LRU eviction under pressure re-prefills transparently; release frees the slot", async () => {
      const { engine: e } = engine(2, 64);
      const t1 = await e.generate({ prompt: prompt(1, 2), sampling: greedy(3), sessionId: "a" });
      await e.generate({ prompt: prompt(3, 4), sampling: greedy(3), sessionId: "b" });
      await e.generate({ prompt: prompt(5, 6), sampling: greedy(3), sessionId: "c" }); // evicts "a"
      expect(e.stats().evictions).toBe(1);
      expect(e.stats().idleSessions).toBe(2);
      const next = prompt(1, 2, ...t1.tokenIds, 8);
      const again = await e.generate({ prompt: next, sampling: greedy(3), sessionId: "a" }); // evicts "b"
      expect(again.cachedPromptTokens).toBe(0);
      const { engine: fresh } = engine();
      expect(again.tokenIds).toEqual((await fresh.generate({ prompt: next, sampling: greedy(3) })).tokenIds);
      e.releaseSession("a");
      e.releaseSession("c");
      expect(e.stats().freeSlots).toBe(2);
      expect(e.stats().idleSessions).toBe(0);
      await e.close();
      await fresh.close();
    });

    test("two turns of one session never run at once", async () => {
      const { engine: e } = engine();
      const [a, b] = await Promise.all([
        e.generate({ prompt: prompt(1, 2), sampling: greedy(4), sessionId: "s" }),
        e.generate({ prompt: prompt(1, 2), sampling: greedy(4), sessionId: "s" }),
      ]);
      expect(b.tokenIds).toEqual(a.tokenIds);
      expect(b.cachedPromptTokens).toBe(1);
      await e.close();
    });
  });

  describe(`prefill batching${mode}`, () => {
    beforeEach(setMode);

    /**
     * Four long requests decode while three newcomers arrive one scheduler step apart (as an
     * episode's next turn does when its reply ends): the prefill calls after the first, the
     * newcomers' tokens, and the decode steps of the whole run.
     */
    async function staggered(opts: { prefillMaxWaitSteps?: number; prefillWaitRatio?: number }) {
      const { engine: e, runner } = engine(8, 64, opts);
      const long = [prompt(1, 2), prompt(3, 4), prompt(5, 6), prompt(7, 8)].map((p) => e.generate({ prompt: p, sampling: greedy(40) }));
      for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
      const newcomers: Promise<GenerationResult>[] = [];
      for (const p of [prompt(9, 10, 11), prompt(12, 13), prompt(14)]) {
        newcomers.push(e.generate({ prompt: p, sampling: greedy(6) }));
        await new Promise((r) => setImmediate(r));
      }
      const results = await Promise.all([...long, ...newcomers]);
      const prefills = runner.prefillCalls.length;
      const decodes = runner.decodeBatchSizes.length;
      await e.close();
      return { results, prefillsAfterFirst: prefills - 1, decodes };
    }

    test("newcomers wait for each other while others decode, up to the wait, and sample the same tokens", async () => {
      const atOnce = await staggered({});
      expect(atOnce.prefillsAfterFirst).toBe(3);
      const batched = await staggered({ prefillMaxWaitSteps: 4, prefillWaitRatio: 100 });
      expect(batched.prefillsAfterFirst).toBe(1);
      expect(batched.results.map((r) => r.tokenIds)).toEqual(atOnce.results.map((r) => r.tokenIds));
      expect(batched.results.map((r) => r.logprobs)).toEqual(atOnce.results.map((r) => r.logprobs));
      // The long requests set the run's length: waiting cost them nothing.
      expect(batched.decodes).toBe(atOnce.decodes);
    });

    test("enough ready prompts against the decoding ones are prefilled without waiting", async () => {
      const atOnce = await staggered({});
      // ratio 0.25: against four decoding sequences one ready prompt is enough; against the
      // five decoding once it joined, two are, so the second and third go together
      const quarter = await staggered({ prefillMaxWaitSteps: 1000, prefillWaitRatio: 0.25 });
      expect(quarter.prefillsAfterFirst).toBe(2);
      expect(quarter.decodes).toBe(atOnce.decodes);
      // ratio 0.5: the first two go together; the third, against six decoding then, would
      // need three, and with no step limit it waits until nothing decodes, after the long requests
      const half = await staggered({ prefillMaxWaitSteps: 1000, prefillWaitRatio: 0.5 });
      expect(half.prefillsAfterFirst).toBe(2);
      expect(half.decodes).toBeGreaterThan(atOnce.decodes);
      expect(half.results.map((r) => r.tokenIds)).toEqual(atOnce.results.map((r) => r.tokenIds));
    });

    test("with nothing decoding a prompt is prefilled at once, whatever the wait", async () => {
      const { engine: e, runner } = engine(4, 64, { prefillMaxWaitSteps: 1000, prefillWaitRatio: 100 });
      const solo = await e.generate({ prompt: prompt(1, 2, 3), sampling: greedy(4) });
      expect(solo.tokenIds.length).toBe(4);
      expect(runner.prefillCalls.length).toBe(1);
      // A session's next turn, after its first finished: nothing else runs, so no wait.
      const next = await e.generate({ prompt: prompt(1, 2, 3, ...solo.tokenIds, 7), sampling: greedy(4) });
      expect(next.tokenIds.length).toBe(4);
      expect(runner.prefillCalls.length).toBe(2);
      await e.close();
    });
  });
}
