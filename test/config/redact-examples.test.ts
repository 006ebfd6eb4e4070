/**
 * Every example config survives the secret redaction unchanged: a run's config.yaml (which
 * is the redacted config) must load again and mean the same, so no key of a real config may
 * be taken for a secret because of a word in its name (`lambda_token`, `max_tokens`).
 */
import { describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import YAML from "yaml";
import { CONFIG_KINDS } from "../../src/cli/main.ts";
import { redactSecrets, resolveConfig } from "../../src/config/index.ts";

const EXAMPLES = join(import.meta.dir, "../../examples");

/** Every YAML file under examples/train, eval and sft (partials, named `_*.yaml`, too). */
function exampleFiles(): string[] {
  return ["train", "eval", "sft"].flatMap((sub) =>
    readdirSync(join(EXAMPLES, sub))
      .filter((f) => f.endsWith(".yaml"))
      .sort()
      .map((f) => join(EXAMPLES, sub, f)),
  );
}

/** Every key path of a tree, `algorithm.lambda_token`, `envs.0.config.size` ... */
function keyPaths(value: unknown, prefix = ""): string[] {
  if (Array.isArray(value)) return value.flatMap((item, i) => keyPaths(item, `${prefix}${i}.`));
  if (typeof value !== "object" || value === null) return [];
  return Object.entries(value).flatMap(([k, v]) => [`${prefix}${k}`, ...keyPaths(v, `${prefix}${k}.`)]);
}

describe("redaction of the example configs", () => {
  const files = exampleFiles();

  test("there are train, eval and sft examples to check", () => {
    for (const sub of ["train", "eval", "sft"]) expect(files.some((f) => f.includes(`/examples/${sub}/`)), sub).toBe(true);
  });

  for (const file of files) {
    const name = file.slice(EXAMPLES.length + 1);
    test(`${name}: the composed file and the checked config are unchanged by the redaction`, async () => {
      const resolved = resolveConfig(file, []);
      expect(redactSecrets(resolved.data)).toEqual(resolved.data);
      // Partials (`_base.yaml`) are not whole configs of any kind; the rest are checked as
      // their command checks them, defaults filled in: what a run writes to config.yaml.
      if (name.split("/").pop()!.startsWith("_")) return;
      const kind = CONFIG_KINDS.find((k) => k.detect(resolved.data));
      expect(kind, `${name}: no config kind`).toBeDefined();
      const checked = kind!.load ? await kind!.load(resolved) : resolved.data;
      const redacted = redactSecrets(checked);
      expect(keyPaths(redacted)).toEqual(keyPaths(checked));
      expect(redacted).toEqual(checked);
      // config.yaml as a run writes it reads back as the same config.
      expect(YAML.parse(YAML.stringify(redacted))).toEqual(YAML.parse(YAML.stringify(checked)));
    });
  }

  test("the keys that used to be taken for secrets are there and keep their values", async () => {
    const resolved = resolveConfig(join(EXAMPLES, "train/sokoban-vision-full.yaml"), []);
    const kind = CONFIG_KINDS.find((k) => k.detect(resolved.data))!;
    const checked = (await kind.load!(resolved)) as { algorithm: { lambda_token: number } };
    expect(checked.algorithm.lambda_token).toBe(1.0);
    expect(redactSecrets(checked).algorithm.lambda_token).toBe(1.0);
    expect(YAML.stringify(redactSecrets(checked))).toContain("lambda_token: 1");
  });
});
