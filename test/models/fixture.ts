/**
 * Access to the committed tiny Qwen2.5-VL fixture (test/fixtures/qwen2_5_vl_tiny), made by
 * make_fixture.py with transformers: the model directory itself plus refs.json (prompts,
 * token ids, greedy generations, smart_resize table) and refs.safetensors (reference
 * tensors), read here into typed arrays without libtorch.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { ChatMessage } from "../../src/core/chat.ts";
import type { RGBImage } from "../../src/core/image.ts";
import { readPng } from "../../src/models/image-io.ts";

export const FIXTURE_DIR = join(import.meta.dir, "..", "fixtures", "qwen2_5_vl_tiny");

export interface RefTensor {
  dtype: string;
  shape: number[];
  /** Values as float64 (ints and floats alike; fixture values are small). */
  values: Float64Array;
}

const cachedRefs = new Map<string, Map<string, RefTensor>>();

/** All tensors in `dir`/refs.safetensors (F32 / I64 / I32). */
export function refTensors(dir = FIXTURE_DIR): Map<string, RefTensor> {
  const cached = cachedRefs.get(dir);
  if (cached) return cached;
  const buf = readFileSync(join(dir, "refs.safetensors"));
  const headerLen = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + headerLen).toString("utf8")) as Record<
    string,
    { dtype: string; shape: number[]; data_offsets: [number, number] }
  >;
  const base = 8 + headerLen;
  const out = new Map<string, RefTensor>();
  for (const [name, info] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const [s, e] = info.data_offsets;
    const bytes = buf.buffer.slice(buf.byteOffset + base + s, buf.byteOffset + base + e);
    let values: Float64Array;
    if (info.dtype === "F32") values = Float64Array.from(new Float32Array(bytes));
    else if (info.dtype === "I64") values = Float64Array.from(new BigInt64Array(bytes), Number);
    else if (info.dtype === "I32") values = Float64Array.from(new Int32Array(bytes));
    else throw new Error(`refs.safetensors: unsupported dtype ${info.dtype} for ${name}`);
    out.set(name, { dtype: info.dtype, shape: info.shape, values });
  }
  cachedRefs.set(dir, out);
  return out;
}

export function ref(name: string, dir = FIXTURE_DIR): RefTensor {
  const t = refTensors(dir).get(name);
  if (!t) throw new Error(`${dir}/refs.safetensors has no tensor ${name}`);
  return t;
}

export interface RefCase {
  image_keys?: string[];
  messages?: unknown[];
  input_ids?: number[];
  greedy?: number[];
  prompt_text?: string;
  greedy_text?: string;
  /** Keyword arguments the reference rendered the chat template with (enable_thinking, ...). */
  template_kwargs?: Record<string, unknown>;
  image_grid_thw?: number[][];
  rows?: string[];
  padding?: "left" | "right";
}

export interface Refs {
  images: Record<string, { file: string; width: number; height: number }>;
  smart_resize: { height: number; width: number; resized?: [number, number]; error?: string }[];
  tokenizer_checks: { text: string; ids: number[] }[];
  cases: Record<string, RefCase>;
}

export function refsJson(dir = FIXTURE_DIR): Refs {
  return JSON.parse(readFileSync(join(dir, "refs.json"), "utf8")) as Refs;
}

/** max |a - b| / max |b|: the error relative to the reference's scale. */
export function maxRelativeError(actual: ArrayLike<number>, expected: ArrayLike<number>): number {
  let maxDiff = 0;
  let maxRef = 0;
  for (let i = 0; i < expected.length; i++) {
    maxDiff = Math.max(maxDiff, Math.abs(actual[i]! - expected[i]!));
    maxRef = Math.max(maxRef, Math.abs(expected[i]!));
  }
  return maxDiff / (maxRef || 1);
}

interface MessageCase {
  messages: { role: ChatMessage["role"]; content: string | { type: string; text?: string }[] }[];
  image_keys?: string[];
}

/** One of the fixture's committed images (images/a.png, b.png, c.png) as pixels. */
export function fixtureImage(name: "a" | "b" | "c"): RGBImage {
  return readPng(join(FIXTURE_DIR, "images", `${name}.png`));
}

/** A reference case's messages in the client seam's form (images as pixels). */
export function fixtureMessages(dir: string, name: string): ChatMessage[] {
  const refs = refsJson(dir) as unknown as { cases: Record<string, MessageCase>; images: Record<string, { file: string }> };
  const c = refs.cases[name];
  if (!c) throw new Error(`${dir}: no reference case "${name}"`);
  const keys = [...(c.image_keys ?? [])];
  return c.messages.map((m) => ({
    role: m.role,
    content:
      typeof m.content === "string"
        ? [{ type: "text" as const, text: m.content }]
        : m.content.map((p) =>
            p.type === "image"
              ? { type: "image" as const, image: readPng(join(dir, refs.images[keys.shift()!]!.file)) }
              : { type: "text" as const, text: p.text! },
          ),
  }));
}
