/**
 * The table `vagen eval` prints when a run ends, fitted to the terminal: short column
 * names (`key` says which summary.json field each shows), and when an env
 * tag is too long for one line at `width` columns, the tag on a line of its own above its
 * numbers, so no row ever wraps. Numbers are never cut.
 */
import type { EnvSummary, EvalSummary } from "../../evaluation/summary.ts";

/** Each column: its heading, summary.json's name for it, and a row's cell. */
interface Column {
  heading: string;
  key: string;
  cell: (s: EnvSummary) => string;
}

const COLUMNS: Column[] = [
  { heading: "episodes", key: "episodes", cell: (s) => (s.episodes === s.planned ? String(s.episodes) : `${s.episodes}/${s.planned}`) },
  { heading: "success", key: "success_rate", cell: (s) => s.success_rate.toFixed(3) },
  { heading: "reward", key: "mean_reward", cell: (s) => s.mean_reward.toFixed(3) },
  { heading: "turns", key: "mean_turns", cell: (s) => s.mean_turns.toFixed(2) },
  { heading: "format_err", key: "format_error_rate", cell: (s) => (s.format_error_rate === null ? "-" : s.format_error_rate.toFixed(3)) },
  { heading: "errors", key: "error_episodes", cell: (s) => String(s.error_episodes) },
];

const JUDGE: Column = { heading: "judge_fail", key: "judge failures/requests", cell: (s) => (s.judge ? `${s.judge.failures}/${s.judge.requests}` : "-") };

const GAP = "  ";

export function formatEvalTable(summary: EvalSummary, width = 80): string {
  const envs = Object.entries(summary.envs);
  const columns = envs.some(([, s]) => s.judge !== undefined) ? [...COLUMNS, JUDGE] : COLUMNS;
  const cells = envs.map(([, s]) => columns.map((c) => c.cell(s)));
  const widths = columns.map((c, i) => Math.max(c.heading.length, ...cells.map((r) => r[i]!.length)));
  const numbers = (row: string[]) => row.map((cell, i) => cell.padStart(widths[i]!)).join(GAP);
  const headings = numbers(columns.map((c) => c.heading));
  const tagWidth = Math.max(3, ...envs.map(([tag]) => tag.length));
  const lines: string[] = [];
  if (tagWidth + GAP.length + headings.length <= width) {
    lines.push(`${"env".padEnd(tagWidth)}${GAP}${headings}`);
    envs.forEach(([tag], i) => lines.push(`${tag.padEnd(tagWidth)}${GAP}${numbers(cells[i]!)}`));
  } else {
    // Tags too long to share a line with the numbers: each above its own row.
    lines.push("env", `${GAP}${headings}`);
    envs.forEach(([tag], i) => lines.push(tag, `${GAP}${numbers(cells[i]!)}`));
  }
  return `${lines.map((l) => l.trimEnd()).join("\n")}\n`;
}
