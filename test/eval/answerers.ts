/**
 * What the fake server answers: the env's BFS solution for the observed state (read from
 * the text grid in the last observation), garbage, or a lookup by observation image for
 * vision runs. Answers follow the format the system prompt asks for: main's `wm`
 * protocol when it names `<perception>`, `free_think` otherwise.
 */
import { shortestPath } from "../../envs/frozenlake/map.ts";
import { roomFromText, shortestSolution } from "../../envs/sokoban/index.ts";
import { imageUrls, lastUserText, type WireRequest } from "./fake-openai-server.ts";

function capitalised(actions: string[]): string {
  return actions.map((a) => a[0]!.toUpperCase() + a.slice(1)).join(",");
}

/** Main's wm protocol: perception, reasoning, prediction, answer last. */
export function wmAnswer(actions: string[]): string {
  return `<perception>-</perception><reasoning>follow the shortest path</reasoning><prediction>-</prediction><answer>${capitalised(actions)}</answer>`;
}

export function freeThinkAnswer(actions: string[]): string {
  return `<think>follow the shortest path</think><answer>${capitalised(actions)}</answer>`;
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
  const answer = system.includes("<perception>...</perception>") ? wmAnswer : freeThinkAnswer;
  if (system.includes("Sokoban")) return answer(sokobanSolution(grid));
  if (system.includes("FrozenLake")) return answer(frozenLakeSolution(grid));
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
