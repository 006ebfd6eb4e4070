/**
 * Gradients through the chunked token log-probs when the logits come out of a model (a
 * non-leaf tensor): one backward without retaining the graph must reach the model's
 * weights, equal to the direct unchunked log_softmax computation.
 */
import { describe, expect, test } from "bun:test";
import { torch, expectClose, values } from "../torch/helpers.ts";
import { tokenLogProbs } from "../../src/algorithms/entropy.ts";

const ROWS = 2;
const WIDTH = 5;
const HIDDEN = 4;
const VOCAB = 7;

/** A tiny "model": hidden states times a weight matrix give the logits (not a leaf). */
function setup(seed: number) {
  torch.manualSeed(seed);
  const weight = torch.randn([HIDDEN, VOCAB]).requiresGrad_(true);
  const hidden = torch.randn([ROWS, WIDTH, HIDDEN]);
  const tokens = torch.randint(0, VOCAB, [ROWS, WIDTH], { dtype: "i64" });
  const coefs = torch.randn([ROWS, WIDTH]);
  return { weight, hidden, tokens, coefs };
}

/** The direct computation: log_softmax over the whole vocabulary at once. */
function directLoss(logits: torch.Tensor, tokens: torch.Tensor, coefs: torch.Tensor): torch.Tensor {
  const logp = logits.logSoftmax(-1);
  const picked = logp.gather(2, tokens.unsqueeze(2)).squeeze(2);
  const entropy = logp.exp().mul(logp).sum(-1).neg();
  return picked.mul(coefs).sum().add(entropy.mul(0.1).sum());
}

describe("tokenLogProbs backward into a model", () => {
  for (const chunkTokens of [1, 3, 4, 10, 1024]) {
    test(`chunks of ${chunkTokens} tokens: one backward, gradients equal the direct computation`, () => {
      torch.tidy(() => {
        const { weight, hidden, tokens, coefs } = setup(11);
        const out = tokenLogProbs(hidden.matmul(weight), tokens, { chunkTokens });
        out.logProbs.mul(coefs).sum().add(out.entropy!.mul(0.1).sum()).backward();
        const chunked = values(weight.grad!);
        weight.grad = undefined;

        directLoss(hidden.matmul(weight), tokens, coefs).backward();
        expectClose(chunked, values(weight.grad!), 1e-5);
      });
      // the block's backward closure goes with the graph
      expect(torch.pendingCheckpoints()).toBe(0);
    });
  }

  test("bf16 logits: each chunk is upcast to f32, and the gradient comes back in bf16", () =>
    torch.tidy(() => {
      const { weight, hidden, tokens, coefs } = setup(3);
      const w = weight.detach().to({ dtype: "bf16" }).requiresGrad_(true);
      const h = hidden.to({ dtype: "bf16" });
      const out = tokenLogProbs(h.matmul(w), tokens, { chunkTokens: 4 });
      expect(out.logProbs.dtype).toBe("f32");
      out.logProbs.mul(coefs).sum().backward();
      expect(w.grad!.dtype).toBe("bf16");
      const chunked = values(w.grad!);
      w.grad = undefined;

      // the same computation unchunked: upcast, log_softmax, gather
      const logp = h.matmul(w).to({ dtype: "f32" }).logSoftmax(-1);
      logp.gather(2, tokens.unsqueeze(2)).squeeze(2).mul(coefs).sum().backward();
      expectClose(chunked, values(w.grad!), 1e-2, 1e-2);
    }));

  test("several consumers of one model output: gradients add up", () =>
    torch.tidy(() => {
      const { weight, hidden, tokens, coefs } = setup(5);
      const logits = hidden.matmul(weight);
      const a = tokenLogProbs(logits, tokens, { chunkTokens: 3, withEntropy: false });
      const b = tokenLogProbs(logits, tokens, { chunkTokens: 4 });
      a.logProbs.mul(coefs).sum().add(b.entropy!.sum()).backward();
      const chunked = values(weight.grad!);
      weight.grad = undefined;

      const logp = hidden.matmul(weight).logSoftmax(-1);
      const picked = logp.gather(2, tokens.unsqueeze(2)).squeeze(2);
      picked.mul(coefs).sum().add(logp.exp().mul(logp).sum(-1).neg().sum()).backward();
      expectClose(chunked, values(weight.grad!), 1e-5);
    }));
});

describe("tokenLogProbs without the never-sampled ids (the engine's vision ids)", () => {
  test("hand values: p = [0.5, 0.3, 0.15, 0.05] without id 0 is [0.6, 0.3, 0.1]", () => {
    torch.tidy(() => {
      const logits = torch.tensor(Float32Array.from([0.5, 0.3, 0.15, 0.05].map(Math.log)), [1, 1, 4]);
            const out = tokenLogProbs(logits, torch.tensor(Float64Array.from([2]), [1, 1], { dtype: "i64" }), { neverSampled: [0] });
      expect(values(out.logProbs)[0]).toBeCloseTo(Math.log(0.3), 5);
      expect(values(out.entropy!)[0]).toBeCloseTo(-(0.6 * Math.log(0.6) + 0.3 * Math.log(0.3) + 0.1 * Math.log(0.1)), 5);
      // At temperature 2 the bias still takes id 0 out entirely: softmax(log p / 2) over ids 1-3.
      const t2 = tokenLogProbs(logits, torch.tensor(Float64Array.from([1]), [1, 1], { dtype: "i64" }), { neverSampled: [0], temperature: 2 });
      const r = [0.3, 0.15, 0.05].map(Math.sqrt);
      expect(values(t2.logProbs)[0]).toBeCloseTo(Math.log(r[0]! / (r[0]! + r[1]! + r[2]!)), 5);
    });
  });

  for (const chunkTokens of [1, 4, 1024]) {
    test(`chunks of ${chunkTokens}: values and gradients equal log_softmax over the other ids alone`, () => {
      torch.tidy(() => {
        const { weight, hidden, coefs } = setup(5);
        const blocked = [0, 4];
        const allowed = [1, 2, 3, 5, 6];
        // Tokens among the allowed ids only (the engine never samples the others).
        const tokens = torch.tensor(Float64Array.from({ length: ROWS * WIDTH }, (_, i) => allowed[(i * 3) % allowed.length]!), [ROWS, WIDTH], { dtype: "i64" });
        const out = tokenLogProbs(hidden.matmul(weight), tokens, { chunkTokens, neverSampled: blocked, temperature: 0.7 });
        out.logProbs.mul(coefs).sum().add(out.entropy!.mul(0.1).sum()).backward();
        const biased = values(weight.grad!);
        const lp = values(out.logProbs);
        const ent = values(out.entropy!);
        weight.grad = undefined;
        expect(biased.every(Number.isFinite)).toBe(true);

        // The reference: the allowed columns only, tokens renumbered into them.
        const columns = torch.tensor(Float64Array.from(allowed), [allowed.length], { dtype: "i64" });
        const narrowTokens = torch.tensor(Float64Array.from(values(tokens), (id) => allowed.indexOf(id)), [ROWS, WIDTH], { dtype: "i64" });
        const logits = hidden.matmul(weight).indexSelect(2, columns).div(0.7);
        const logp = logits.logSoftmax(-1);
        const picked = logp.gather(2, narrowTokens.unsqueeze(2)).squeeze(2);
        const entropy = logp.exp().mul(logp).sum(-1).neg();
        expectClose(lp, values(picked), 1e-5);
        expectClose(ent, values(entropy), 1e-5);
        picked.mul(coefs).sum().add(entropy.mul(0.1).sum()).backward();
        expectClose(biased, values(weight.grad!), 1e-5);
      });
    });
  }

  test("a backward after the forward's scope has closed still finds the ids (they are rebuilt per chunk)", () => {
    const { weight, hidden, tokens, coefs } = setup(7);
    const out = torch.tidy(() => {
      const r = tokenLogProbs(hidden.matmul(weight), tokens, { chunkTokens: 3, neverSampled: [6] });
      return torch.keep(r.logProbs.mul(coefs).sum());
    });
    out.backward();
    expect(values(weight.grad!).every(Number.isFinite)).toBe(true);
    // id 6 is out of every position's distribution: its column of the weight gets no gradient
    const grad = values(weight.grad!);
    for (let h = 0; h < HIDDEN; h++) expect(grad[h * VOCAB + 6]).toBe(0);
    out.dispose();
  });
});
