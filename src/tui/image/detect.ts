/**
 * Guesses the best image protocol from the environment, as other terminal tools do
 * (without querying the terminal, which would race the UI for stdin):
 * kitty and Ghostty speak kitty's protocol; iTerm2, WezTerm, VS Code and mintty speak
 * iTerm2's; foot, mlterm and TERMs that name sixel speak sixel. Inside tmux or screen the
 * escapes would need passthrough, so half-blocks are used there, as everywhere else.
 */
import type { ImageMode, ImageProtocol } from "./protocol.ts";

export type Environment = Record<string, string | undefined>;

export function detectImageProtocol(env: Environment = process.env): ImageProtocol {
  const term = env.TERM ?? "";
  const program = env.TERM_PROGRAM ?? "";
  if (env.TMUX || term.startsWith("screen") || term.startsWith("tmux")) return "blocks";
  if (env.KITTY_WINDOW_ID || term === "xterm-kitty" || program === "ghostty" || term === "xterm-ghostty") return "kitty";
  if (program === "iTerm.app" || env.LC_TERMINAL === "iTerm2" || program === "WezTerm" || program === "vscode" || program === "mintty") return "iterm2";
  if (term.startsWith("foot") || term.startsWith("mlterm") || term.includes("sixel")) return "sixel";
  if (term === "dumb") return "none";
  return "blocks";
}

export function resolveImageMode(mode: ImageMode, env: Environment = process.env): ImageProtocol {
  return mode === "auto" ? detectImageProtocol(env) : mode;
}
