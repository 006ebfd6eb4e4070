import { describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as torch from "../../src/torch/index.ts";
import { safetensorsSuite } from "./suites/safetensors.ts";

safetensorsSuite("cpu");

describe("saving outside a scope", () => {
  test("leaves no tensor behind (the host copy's intermediate is freed too)", () => {
    const dir = mkdtempSync(join(tmpdir(), "vagen-st-leak-"));
    const w = torch.keep(torch.randn([4, 4]));
    const before = torch.liveTensors();
    torch.safetensors.save(join(dir, "a.safetensors"), { w });
    torch.safetensors.saveSharded(join(dir, "sharded"), new Map([["w", w]]));
    expect(torch.liveTensors()).toBe(before);
    w.dispose();
  });
});
