import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as v from "valibot";
import { loadConfig, parseKeyValues, parseOverride, resolveConfig, resolveTree, validate } from "../../src/config/index.ts";
import { VagenError } from "../../src/core/errors.ts";

const Schema = v.strictObject({
  name: v.string(),
  trainer: v.strictObject({
    lr: v.pipe(v.number(), v.minValue(0)),
    epochs: v.optional(v.pipe(v.number(), v.integer()), 1),
    seeds: v.optional(v.array(v.number()), []),
    ckpt: v.optional(v.nullable(v.string()), null),
  }),
  env: v.optional(v.strictObject({ kind: v.picklist(["Sokoban", "FrozenLake"]), size: v.optional(v.number(), 6) })),
});

let dir: string;
const write = (name: string, text: string) => writeFileSync(join(dir, name), text);

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "vagen-config-"));
  write("base.yaml", "name: base\ntrainer:\n  lr: 0.1\n  epochs: 3\n  seeds: [1, 2]\n");
  write("mid.yaml", "defaults: [base]\ntrainer:\n  lr: 0.01\n");
  write("top.yaml", "extends:\n  - mid.yaml\nname: top\nenv:\n  kind: Sokoban\n");
  write("self-first.yaml", "defaults: [_self_, base]\nname: mine\n");
  write("loop-a.yaml", "defaults: [loop-b]\n");
  write("loop-b.yaml", "defaults: [loop-a]\n");
  write("missing-include.yaml", "defaults: [nope]\n");
  write("bad-yaml.yaml", "name: [unclosed\n");
  write("bad-value.yaml", "defaults: [base]\ntrainer:\n  lr: fast\n");
  write("typo.yaml", "defaults: [base]\ntrainer:\n  epohcs: 2\n");
  write("list-top.yaml", "- 1\n- 2\n");
  write("bad-defaults.yaml", "defaults: 3\nname: x\n");
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function errorOf(fn: () => unknown): VagenError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(VagenError);
    return err as VagenError;
  }
  throw new Error("expected an error");
}

describe("composition", () => {
  test("defaults and extends merge parents first, own keys last, deeply", () => {
    const cfg = loadConfig(join(dir, "top.yaml"), [], Schema);
    expect(cfg).toEqual({
      name: "top",
      trainer: { lr: 0.01, epochs: 3, seeds: [1, 2], ckpt: null },
      env: { kind: "Sokoban", size: 6 },
    });
  });
  test("_self_ first lets the included file win", () => {
    expect(resolveConfig(join(dir, "self-first.yaml")).data.name).toBe("base");
  });
  test("sources record which file set each key", () => {
    const { sources } = resolveConfig(join(dir, "top.yaml"), ["trainer.epochs=9"]);
    expect(sources.get("trainer.lr")).toEndWith("mid.yaml");
    expect(sources.get("trainer.seeds")).toEndWith("base.yaml");
    expect(sources.get("name")).toEndWith("top.yaml");
    expect(sources.get("trainer.epochs")).toStartWith("command line");
  });
  test("include loops, missing includes, bad YAML and non-mapping files are clear errors", () => {
    expect(errorOf(() => resolveConfig(join(dir, "loop-a.yaml"))).message).toContain("loop");
    expect(errorOf(() => resolveConfig(join(dir, "missing-include.yaml"))).message).toMatch(/not found: .*nope.*listed in .*missing-include.yaml/);
    expect(errorOf(() => resolveConfig(join(dir, "bad-yaml.yaml"))).message).toContain("invalid YAML");
    expect(errorOf(() => resolveConfig(join(dir, "list-top.yaml"))).message).toContain("expected a mapping");
    expect(errorOf(() => resolveConfig(join(dir, "bad-defaults.yaml"))).message).toContain('key "defaults": expected a list of file paths');
    expect(errorOf(() => resolveConfig(join(dir, "absent.yaml"))).message).toContain("config file not found");
  });
});

describe("overrides", () => {
  test("values are typed like YAML", () => {
    const value = (s: string) => {
      const o = parseOverride(s);
      return o.kind === "set" ? o.value : undefined;
    };
    expect(value("a=1e-6")).toBe(1e-6);
    expect(value("a=3")).toBe(3);
    expect(value("a=true")).toBe(true);
    expect(value("a=null")).toBeNull();
    expect(value("a=[1,5]")).toEqual([1, 5]);
    expect(value('a="010"')).toBe("010");
    expect(value("a='x y'")).toBe("x y");
    expect(value("a=hello")).toBe("hello");
    expect(value("a=")).toBe("");
    expect(value("a={b: 2}")).toEqual({ b: 2 });
  });
  test("apply to nested keys, create missing ones, + and ~ prefixes", () => {
    const cfg = loadConfig(join(dir, "top.yaml"), ["trainer.lr=0.5", "+trainer.ckpt=ck/1", "env.size=8", "trainer.seeds=[3]"], Schema);
    expect(cfg.trainer).toEqual({ lr: 0.5, epochs: 3, seeds: [3], ckpt: "ck/1" });
    expect(cfg.env?.size).toBe(8);
    const { data } = resolveConfig(join(dir, "top.yaml"), ["~env"]);
    expect(data.env).toBeUndefined();
  });
  test("malformed overrides and paths through scalars are errors", () => {
    expect(errorOf(() => parseOverride("novalue")).message).toContain("key.path=value");
    expect(errorOf(() => parseOverride("=3")).message).toContain("key.path=value");
    expect(errorOf(() => parseOverride("a..b=3")).message).toContain("dotted key path");
    expect(errorOf(() => parseOverride("a=[1,")).message).toContain("YAML value");
    expect(errorOf(() => resolveConfig(join(dir, "top.yaml"), ["name.first=x"])).message).toContain('"name" is "top", not a mapping');
  });
  test("key=value lists build env configs", () => {
    expect(parseKeyValues(["dim_room=[8,8]", "num_boxes=2", "render.mode=vision"])).toEqual({
      dim_room: [8, 8],
      num_boxes: 2,
      render: { mode: "vision" },
    });
  });
});

describe("validation errors name file, key, value and expectation", () => {
  test("wrong type from a file", () => {
    const msg = errorOf(() => loadConfig(join(dir, "bad-value.yaml"), [], Schema)).message;
    expect(msg).toContain("bad-value.yaml");
    expect(msg).toContain('key "trainer.lr"');
    expect(msg).toContain('"fast"');
    expect(msg).toContain("expected number");
  });
  test("wrong value from the command line names the override", () => {
    const msg = errorOf(() => loadConfig(join(dir, "top.yaml"), ["trainer.epochs=2.5"], Schema)).message;
    expect(msg).toContain("command line (trainer.epochs=2.5)");
    expect(msg).toContain("integer");
    const neg = errorOf(() => loadConfig(join(dir, "top.yaml"), ["trainer.lr=-1"], Schema)).message;
    expect(neg).toContain('key "trainer.lr": got -1');
    expect(neg).toContain(">=0");
  });
  test("unknown key suggests the closest known one", () => {
    const msg = errorOf(() => loadConfig(join(dir, "typo.yaml"), [], Schema)).message;
    expect(msg).toContain('unknown key "trainer.epohcs"');
    expect(msg).toContain('did you mean "epochs"');
    expect(msg).toContain("typo.yaml");
  });
  test("bad picklist value lists the choices", () => {
    const msg = errorOf(() => loadConfig(join(dir, "top.yaml"), ["env.kind=Sokobn"], Schema)).message;
    expect(msg).toContain('"Sokoban" | "FrozenLake"');
  });
  test("missing required key", () => {
    const msg = errorOf(() => validate(Schema, { trainer: { lr: 1 } }, { file: "x.yaml" })).message;
    expect(msg).toContain('x.yaml: key "name": got nothing (the key is missing), expected string');
  });
  test("several problems are listed together", () => {
    const msg = errorOf(() => validate(Schema, { name: 1, trainer: { lr: "a" }, extra: 1 }, {})).message;
    expect(msg.split("\n").length).toBeGreaterThanOrEqual(4);
  });
  test("in-memory trees resolve the same way", () => {
    const r = resolveTree({ name: "n", trainer: { lr: 1 } }, ["trainer.lr=2"]);
    expect(validate(Schema, r.data).trainer.lr).toBe(2);
  });
});
