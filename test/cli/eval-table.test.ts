import { describe, expect, test } from "bun:test";
import { formatEvalTable } from "../../src/cli/render/eval-table.ts";
import type { EnvSummary, EvalSummary } from "../../src/evaluation/summary.ts";

const env = (over: Partial<EnvSummary> = {}): EnvSummary => ({
  env_name: "Sokoban",
  harness: "concat",
  episodes: 16,
  planned: 16,
  success_rate: 0.4375,
  mean_reward: -1.25,
  mean_turns: 3.5,
  format_error_rate: 0.0625,
  error_episodes: 1,
  ...over,
});

const summary = (envs: Record<string, EnvSummary>): EvalSummary => ({ created_at: "", model: "m", complete: true, envs });

describe("the final eval table", () => {
  test("short headings, numbers right-aligned under them, within 80 columns", () => {
    const text = formatEvalTable(summary({ sokoban: env(), frozenlake: env({ episodes: 3, planned: 4, format_error_rate: null }) }));
    expect(text).toBe(
      [
        "env         episodes  success  reward  turns  format_err  errors",
        "sokoban           16    0.438  -1.250   3.50       0.063       1",
        "frozenlake       3/4    0.438  -1.250   3.50           -       1",
        "",
      ].join("\n"),
    );
  });

  test("with a judge and tags too long to share a line: each tag above its numbers, no line past 80 columns", () => {
    const judge = { requests: 1200, failures: 30, unparseable: 2, episodes_with_failures: 4 };
    const tags = ["sokoban_visual_free_think_world_model_reward", "frozenlake_text_grounding_world_modeling_long"];
    const text = formatEvalTable(summary({ [tags[0]!]: env({ judge }), [tags[1]!]: env() }));
    const lines = text.trimEnd().split("\n");
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(80);
    expect(lines).toEqual([
      "env",
      "  episodes  success  reward  turns  format_err  errors  judge_fail",
      tags[0],
      "        16    0.438  -1.250   3.50       0.063       1     30/1200",
      tags[1],
      "        16    0.438  -1.250   3.50       0.063       1           -",
    ]);
  });

  test("a wider terminal keeps long tags on the row", () => {
    const text = formatEvalTable(summary({ sokoban_visual_free_think_world_model_reward: env() }), 160);
    expect(text.split("\n")[1]).toMatch(/^sokoban_visual_free_think_world_model_reward +16 +0\.438/);
  });
});
