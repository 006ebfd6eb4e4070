/**
 * scripts/import-cycles.ts: comments are blanked (a comment quoting an import line is no
 * import) while strings, templates and regexes stay; type-only edges are told apart; a
 * cycle is found and walked back to its start; and the project's own modules have none.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { blankComments, importCycles } from "../../scripts/import-cycles.ts";

const ROOT = join(import.meta.dir, "..", "..");

describe("import cycles", () => {
  test("comments are blanked; strings, templates and regexes are kept", () => {
    const src = [
      '// import { x } from "./a.ts";',
      '/* export * from "./b.ts" */ const s = "// not a comment";',
      "const t = `a ${'/*'} b`; const r = /\\/\\*/g;",
    ].join("\n");
    const out = blankComments(src);
    expect(out).not.toContain("./a.ts");
    expect(out).not.toContain("./b.ts");
    expect(out).toContain('"// not a comment"');
    expect(out).toContain("`a ${'/*'} b`");
    expect(out).toContain("/\\/\\*/g");
    expect(out.split("\n")).toHaveLength(3); // line breaks survive, so positions do too
  });

  test("a cycle is walked from its first file back to it, each edge marked type-only or not", () => {
    const graph = new Map([
      ["/a.ts", [{ to: "/b.ts", typeOnly: false }]],
      ["/b.ts", [{ to: "/c.ts", typeOnly: true }]],
      ["/c.ts", [{ to: "/a.ts", typeOnly: false }, { to: "/d.ts", typeOnly: false }]],
      ["/d.ts", []],
    ]);
    // a -> b, b -(type)-> c, c -> a; d hangs off the cycle and is not in it.
    expect(importCycles(graph)).toEqual([{ files: ["/a.ts", "/b.ts", "/c.ts"], typeOnly: [false, true, false] }]);
    expect(importCycles(new Map([["/a.ts", [{ to: "/b.ts", typeOnly: true }]], ["/b.ts", []]]))).toEqual([]);
  });

  test("src/ and envs/ have none", () => {
    const run = Bun.spawnSync(["bun", join(ROOT, "scripts", "import-cycles.ts"), ROOT]);
    const out = run.stdout.toString();
    expect(out).toMatch(/^0 import cycle\(s\) among \d+ files\n$/);
    expect(run.exitCode).toBe(0);
  });
});
