/**
 * What the fake server answers: the env's BFS solution for the observed state (read from
 * the text grid in the last observation), garbage, or a lookup by observation image for
 * vision runs. Answers use the `wm` tag order, which both `wm` and `free_think` parsers
 * accept (their regexes are unanchored).
 */
import { shortestPath } from "../../envs/frozenlake/map.ts";
import { roomFromText, shortestSolution } from "../../envs/sokoban/index.ts";
import { imageUrls, lastUserText, type WireRequest } from "./fake-openai-server.ts";

export function wmAnswer(actions: string[]): string {
  const words = actions.map((a) => a[0]!.toUpperCase() + a.slice(1));
  return `<observation>-</observation><think>follow the shortest path</think><answer>${words.join(",")}</answer><prediction>-</prediction>`;
}

/** The grid (or image placeholder) between the observation header and "Decide your next action(s)." */
export function observedGrid(text: string): string {
  const match = /(?:\[Initial Observation\]:|the observation is:)\n([\s\S]*?)\nDecide your next action/.exec(text);
  if (!match) throw new Error(`no observation grid in: ${text.slice(0, 200)}`);
  return match[1]!;
}

function systemText(request: WireRequest): string {
  const sys = request.messages.find((m) => m.role === "system");
  return typeof sys?.content === "string" ? sys.content : "";
}

export function sokobanSolution(grid: string): string[] {
  const solution = shortestSolution(roomFromText(grid));
  if (!solution) throw new Error(`unsolvable Sokoban grid:\n${grid}`);
  return solution;
}

/** FrozenLake text cells: P player, _ frozen, O hole, G goal (X / V: player in a hole / on the goal). */
export function frozenLakeSolution(grid: string): string[] {
  let player: [number, number] | undefined;
  const desc = grid
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line, r) =>
      line
        .trim()
        .split(/\s+/)
        .map((cell, c) => {
          if (cell === "P") player = [r, c];
          return cell === "O" || cell === "X" ? "H" : cell === "G" || cell === "V" ? "G" : "F";
        })
        .join(""),
    );
  const path = player ? shortestPath(desc, player) : null;
  if (!path) throw new Error(`no FrozenLake path in:\n${grid}`);
  return path;
}

/** Answers every text-mode Sokoban / FrozenLake observation with its BFS solution. */
export function solverAnswer(request: WireRequest): string {
  const grid = observedGrid(lastUserText(request));
  const system = systemText(request);
  if (system.includes("Sokoban")) return wmAnswer(sokobanSolution(grid));
  if (system.includes("FrozenLake")) return wmAnswer(frozenLakeSolution(grid));
  throw new Error(`solverAnswer: unknown env in system prompt: ${system.slice(0, 80)}`);
}

export function garbageAnswer(): string {
  return "I am not sure. Maybe go somewhere? 42 <answer";
}

/**
 * For vision runs: the answer for a request is looked up by the last image it carries
 * (the current observation), in a table the test builds from the env itself.
 */
export function imageLookupAnswer(table: Map<string, string>): (request: WireRequest) => string {
  return (request) => {
    const urls = imageUrls(request);
    const answer = table.get(urls[urls.length - 1] ?? "");
    if (answer === undefined) throw new Error(`no answer for this image (${urls.length} image(s) in the request)`);
    return answer;
  };
}
