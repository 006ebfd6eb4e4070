/**
 * `vagen sft`'s pieces: the config (bad keys and impossible data fail, naming the key),
 * episodes from the solver and from `vagen eval` folders, and the samples they become:
 * exactly the reply tokens and the end-of-turn token are trained, framed as the chat
 * template frames them, in the layout of the harness the policy will run under.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { encodePng } from "../../src/core/png.ts";
import { VagenError } from "../../src/core/errors.ts";
import { ChatTemplate } from "../../src/models/chat-template.ts";
import { DEFAULT_IMAGE_PROCESSOR } from "../../src/models/image-processor.ts";
import { Qwen25VLConversationCodec } from "../../src/models/qwen2_5_vl/conversation-codec.ts";
import { Qwen25VLProcessor } from "../../src/models/qwen2_5_vl/processor.ts";
import { TextTokenizer } from "../../src/models/tokenizer.ts";
import { loadSftConfig } from "../../src/sft/config.ts";
import { boxBlindPlan, evalEpisodes, solverEpisodes, type Episode } from "../../src/sft/episodes.ts";
import { episodeSamples } from "../../src/sft/samples.ts";
import { FrozenLakeEnv } from "../../envs/frozenlake/env.ts";
import { moveFrom } from "../../envs/frozenlake/dynamics.ts";
import { findCell, shortestPath, type FrozenLakeAction } from "../../envs/frozenlake/map.ts";
import { SokobanEnv } from "../../envs/sokoban/env.ts";
import { applyMove } from "../../envs/sokoban/dynamics.ts";
import { cloneRoom, playerIndex, roomFromText } from "../../envs/sokoban/room.ts";
import { shortestSolution } from "../../envs/sokoban/solver.ts";
import { FIXTURE_DIR } from "../models/fixture.ts";

const tokenizer = TextTokenizer.fromDir(FIXTURE_DIR);
const processor = new Qwen25VLProcessor(tokenizer, ChatTemplate.fromDir(FIXTURE_DIR), DEFAULT_IMAGE_PROCESSOR, 366);
const codec = new Qwen25VLConversationCodec(processor);
const IM_END = 362;
const replies = { encode: (text: string) => tokenizer.encode(text) };

/** The moves of an episode's answers, lower-cased as the envs take them. */
const answeredMoves = (episode: Episode) => episode.replies.map((r) => /<answer>(\w+)<\/answer>/.exec(r)![1]!.toLowerCase());

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "vagen-sft-"));
  dirs.push(dir);
  return dir;
};
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

const FROZENLAKE_TEXT = { render_mode: "text" as const, size: 4, prompt_format: "no_think" as const, max_actions_per_step: 1 };

describe("config", () => {
  const write = (body: Record<string, unknown>) => {
    const file = join(tempDir(), "sft.yaml");
    writeFileSync(file, stringify(body));
    return file;
  };
  const base = { model_dir: "model", output_dir: "out", data: { solver: { env: "FrozenLake", episodes: 4 } } };

  test("paths resolve against the config file's folder; defaults fill the rest", () => {
    const file = write(base);
    const config = loadSftConfig(file, ["train.epochs=3"]);
    expect(config.model_dir).toBe(join(file, "..", "model"));
    expect(config.output_dir).toBe(join(file, "..", "out"));
    expect(config.train.epochs).toBe(3);
    expect(config.data.layout).toBe("no_concat");
    expect(config.data.solver!.random_action_prob).toBe(0);
  });

  test("a misspelled key, an unknown solver env and missing data fail naming the key", () => {
    const file = write(base);
    expect(() => loadSftConfig(file, ["optim.learning_rate=1"])).toThrow(/optim\.learning_rate/);
    expect(() => loadSftConfig(file, ["data.solver.env=Chess"])).toThrow(/data\.solver\.env/);
    expect(loadSftConfig(file, ["data.solver.env=Sokoban", "data.solver.careless_episode_prob=0.5"]).data.solver?.careless_episode_prob).toBe(0.5);
    expect(() => loadSftConfig(file, ["data.solver.env=Sokoban", "data.solver.random_moves=safe"])).toThrow(/data\.solver\.random_moves.*only FrozenLake/);
    expect(() => loadSftConfig(file, ["data.solver.random_moves=sure"])).toThrow(/random_moves/);
    expect(() => loadSftConfig(file, ["data.solver.state_noise_prob=1.5"])).toThrow(/data\.solver\.state_noise_prob/);
    expect(() => loadSftConfig(write({ ...base, data: {} }), [])).toThrow(/key "data": no trajectories/);
    expect(() => loadSftConfig(file, ["train.batch_size=16", "train.micro_batch_size=5"])).toThrow(/train\.micro_batch_size/);
  });
});

describe("episodes", () => {
  test("solver episodes without random moves reach the goal by a shortest path", async () => {
    const episodes = await solverEpisodes({ env: "FrozenLake", config: FROZENLAKE_TEXT, episodes: 6, seed_start: 100, max_turns: 12, random_action_prob: 0, random_moves: "any" as const, actions_per_turn: 1, careless_episode_prob: 0 }, { seed: 0 });
    expect(episodes).toHaveLength(6);
    for (const [i, episode] of episodes.entries()) {
      expect(episode.success).toBe(true);
      const env = new FrozenLakeEnv(FROZENLAKE_TEXT);
      const { info } = await env.reset(100 + i);
      expect(episode.replies).toHaveLength(info.optimal_solution_length as number);
      expect(episode.observations).toHaveLength(episode.replies.length + 1);
      expect(episode.replies.every((r) => /^<answer>(Left|Down|Right|Up)<\/answer>$/.test(r))).toBe(true);
    }
  });

  test("random moves make some demonstrations worse, reproducibly", async () => {
    const config = { env: "FrozenLake" as const, config: FROZENLAKE_TEXT, episodes: 24, seed_start: 0, max_turns: 8, random_action_prob: 0.5, random_moves: "any" as const, actions_per_turn: 1, careless_episode_prob: 0 };
    const a = await solverEpisodes(config, { seed: 3 });
    const b = await solverEpisodes(config, { seed: 3 });
    expect(a.map((e) => e.replies)).toEqual(b.map((e) => e.replies));
    expect(a.some((e) => !e.success)).toBe(true);
    expect(a.some((e) => e.success)).toBe(true);
  });

  test("safe random moves wander but never step into a hole or against the edge", async () => {
    const config = { env: "FrozenLake" as const, config: FROZENLAKE_TEXT, episodes: 40, seed_start: 300, max_turns: 8, random_action_prob: 0.6, random_moves: "safe" as const, actions_per_turn: 1, careless_episode_prob: 0 };
    const episodes = await solverEpisodes(config, { seed: 1 });
    let detours = 0;
    for (const [i, episode] of episodes.entries()) {
      const env = new FrozenLakeEnv(FROZENLAKE_TEXT);
      await env.reset(300 + i);
      const desc = env.current!.desc;
      let [row, col] = findCell(desc, "S")!;
      for (const reply of episode.replies) {
        const move = /<answer>(\w+)<\/answer>/.exec(reply)![1]!.toLowerCase() as FrozenLakeAction;
        const before = shortestPath(desc, [row, col])!.length;
        const [r, c] = moveFrom(desc, row, col, move);
        // Every move lands on another tile, never a hole (the boards of this size leave every
        // player a safe move); a move that is not the solver's is a detour.
        expect([r, c]).not.toEqual([row, col]);
        expect(desc[r]![c]).not.toBe("H");
        if (desc[r]![c] !== "G" && shortestPath(desc, [r, c])!.length >= before) detours++;
        [row, col] = [r, c];
      }
      // Out of turns or at the goal: a safe walker never falls.
      expect(desc[row]![col] === "G" || episode.replies.length === 8).toBe(true);
      expect(episode.success).toBe(desc[row]![col] === "G");
    }
    expect(detours).toBeGreaterThan(10);
    await expect(solverEpisodes({ ...config, env: "Sokoban", config: { dim_room: [6, 6], num_boxes: 1, prompt_format: "no_think" }, episodes: 1 }, { seed: 0 })).rejects.toThrow(/random_moves/);
  });

  test("a careless solver plans as if holes were ice: it walks into the holes on its path, and the rest of its episodes match the solver's", async () => {
    const base = { env: "FrozenLake" as const, config: FROZENLAKE_TEXT, episodes: 40, seed_start: 200, max_turns: 8, random_action_prob: 0, random_moves: "any" as const, actions_per_turn: 1 };
    const careless = await solverEpisodes({ ...base, careless_episode_prob: 1 }, { seed: 0 });
    let fell = 0;
    for (const [i, episode] of careless.entries()) {
      expect(episode.source).toContain("careless");
      const env = new FrozenLakeEnv(FROZENLAKE_TEXT);
      await env.reset(200 + i);
      const desc = env.current!.desc;
      // By hand: the moves are the shortest path on the board with its holes turned to ice,
      // cut where that path first steps on a hole.
      const blind = shortestPath(desc.map((row) => row.replaceAll("H", "F")))!;
      const moves = answeredMoves(episode);
      expect(moves).toEqual(blind.slice(0, moves.length));
      let [row, col] = findCell(desc, "S")!;
      for (const m of moves) [row, col] = moveFrom(desc, row, col, m as FrozenLakeAction);
      expect(desc[row]![col]).toBe(episode.success ? "G" : "H");
      if (!episode.success) fell++;
    }
    // Some boards put a hole on the blind path (the solver fails there), most do not.
    expect(fell).toBeGreaterThan(0);
    expect(fell).toBeLessThan(careless.length / 2);
    const mixed = await solverEpisodes({ ...base, careless_episode_prob: 0.5 }, { seed: 0 });
    const share = mixed.filter((e) => e.source.includes("careless")).length / mixed.length;
    expect(share).toBeGreaterThan(0.25);
    expect(share).toBeLessThan(0.75);
  });

  test("Sokoban's careless solver walks to each push as if the box were floor: where that walk crosses the box it pushes it astray", async () => {
    const config: Record<string, unknown> = { dim_room: [6, 6], num_boxes: 1, min_solution_steps: [1, 5], prompt_format: "no_think", render_mode: "text" };
    const base = { env: "Sokoban" as const, config, episodes: 60, seed_start: 400, max_turns: 9, random_action_prob: 0, random_moves: "any" as const, actions_per_turn: 1 };
    const careless = await solverEpisodes({ ...base, careless_episode_prob: 1 }, { seed: 0 });
    const careful = await solverEpisodes({ ...base, careless_episode_prob: 0 }, { seed: 0 });
    let astray = 0;
    for (const [i, episode] of careless.entries()) {
      expect(episode.source).toContain("careless");
      const env = new SokobanEnv(config);
      await env.reset(400 + i);
      const moves = answeredMoves(episode);
      let unsolvable = false;
      for (const move of moves) {
        const room = env.currentRoom!;
        // Its plan's first move; with no solution left, it moves at random.
        const plan = boxBlindPlan(room);
        if (plan.length > 0) expect(move).toBe(plan[0]!);
        await env.step(`<answer>${move}</answer>`);
        if (shortestSolution(env.currentRoom!, 30) === null) unsolvable = true;
      }
      const same = episode.replies.join() === careful[i]!.replies.join();
      // Where the careless walk kept off the box it is the careful solver's episode and
      // solves the level; where it did not, the box went astray: where no solution is
      // left, or far enough that the turns ran out.
      if (same) expect(episode.success).toBe(true);
      else {
        astray++;
        expect(unsolvable || moves.length === 9).toBe(true);
      }
      await env.close();
    }
    expect(careful.every((e) => e.success)).toBe(true);
    expect(astray).toBeGreaterThan(0);
    expect(astray).toBeLessThan(careless.length / 2);
  });

  test("boxBlindPlan by hand: the box stands between the player and the cell to push it from", () => {
    // The player P stands above the box X, the target O above the player: the box goes up
    // twice, pushed from the cell below it. The careful way walks round the box; the
    // careless one walks straight down into it and pushes it against the bottom wall,
    // where it can never be pushed up again.
    const room = roomFromText(`
      # # # # # #
      # _ O _ _ #
      # _ P _ _ #
      # _ X _ _ #
      # _ _ _ _ #
      # # # # # #`);
    const careful = shortestSolution(room)!;
    expect(careful).toHaveLength(6);
    expect(careful.slice(-2)).toEqual(["up", "up"]);
    expect(careful[0]).not.toBe("down");
    expect(boxBlindPlan(room)).toEqual(["down", "down", "up"]);
    // Already where the push starts: the careful plan.
    const ready = roomFromText(`
      # # # # # #
      # _ _ O _ #
      # _ _ X _ #
      # _ _ P _ #
      # _ _ _ _ #
      # # # # # #`);
    expect(boxBlindPlan(ready)).toEqual(["up"]);
    // No solution: no plan.
    const stuck = roomFromText(`
      # # # # # #
      # X _ O _ #
      # _ P _ _ #
      # _ _ _ _ #
      # _ _ _ _ #
      # # # # # #`);
    expect(boxBlindPlan(stuck)).toEqual([]);
  });

  test("boxBlindPlan by hand: of two equally short walks, the careless one goes through the box", () => {
    // The box X goes down twice to the target O, pushed from the cell above it. From P that
    // cell is two moves away either way: up then right, round the box (the careful way),
    // or right then up, through it. The careless player takes the second and pushes the
    // box against the right wall, from where it can never reach the target's column.
    const room = roomFromText(`
      # # # # # # #
      # _ _ _ _ _ #
      # _ _ P X _ #
      # _ _ _ _ _ #
      # _ _ _ O _ #
      # # # # # # #`);
    expect(shortestSolution(room)).toEqual(["up", "right", "down", "down"]);
    const plan = boxBlindPlan(room);
    expect(plan).toEqual(["right", "up", "down"]);
    const after = cloneRoom(room);
    applyMove(after, playerIndex(after), plan[0]!);
    expect(shortestSolution(after, 30)).toBeNull();
  });

  test("vagen eval folders are read back with their images, and keep their outcome", () => {
    const root = tempDir();
    const image = { width: 2, height: 2, data: new Uint8Array([255, 0, 0, 0, 255, 0, 0, 0, 255, 9, 9, 9]) };
    const writeEpisode = (seed: number, success: boolean) => {
      const dir = join(root, "frozenlake", `seed_${seed}`);
      mkdirSync(join(dir, "images"), { recursive: true });
      writeFileSync(join(dir, "images", "obs_00_0.png"), encodePng(image));
      const messages = [
        { role: "system", content: [{ type: "text", text: "You are a FrozenLake solver." }] },
        { role: "user", content: [{ type: "text", text: "[Initial Observation]:\n" }, { type: "image", path: "images/obs_00_0.png" }] },
        { role: "assistant", content: [{ type: "text", text: "<answer>Down</answer>" }], turn: 1 },
        { role: "user", content: [{ type: "text", text: "done" }] },
      ];
      writeFileSync(join(dir, "messages.json"), JSON.stringify(messages));
      writeFileSync(join(dir, "metrics.json"), JSON.stringify({ success }));
    };
    writeEpisode(1, true);
    writeEpisode(2, false);
    const episodes = evalEpisodes([root]);
    expect(episodes.map((e) => e.success)).toEqual([true, false]);
    const first = episodes[0]!;
    expect(first.replies).toEqual(["<answer>Down</answer>"]);
    expect(first.observations).toHaveLength(2);
    const part = first.observations[0]!.content[1]!;
    expect(part.type === "image" && Array.from(part.image.data)).toEqual(Array.from(image.data));
    expect(() => evalEpisodes([join(root, "missing")])).toThrow(VagenError);
    // a file where a folder is expected, garbage JSON, JSON of the wrong shape: errors naming the file
    expect(() => evalEpisodes([join(root, "frozenlake", "seed_1", "messages.json")])).toThrow(/messages\.json: a file, expected a directory/);
    writeFileSync(join(root, "frozenlake", "seed_2", "messages.json"), "{garbage");
    expect(() => evalEpisodes([root])).toThrow(/seed_2\/messages\.json: not valid JSON/);
    writeFileSync(join(root, "frozenlake", "seed_2", "messages.json"), JSON.stringify([{ role: "robot", content: "hi" }]));
    expect(() => evalEpisodes([root])).toThrow(/seed_2\/messages\.json: at 0\.role: /);
    writeFileSync(join(root, "frozenlake", "seed_2", "messages.json"), "null");
    expect(() => evalEpisodes([root])).toThrow(/seed_2\/messages\.json: at \(top level\)/);
  });
});

describe("samples", () => {
  const episode: Episode = {
    source: "hand-written",
    system: { role: "system", content: [{ type: "text", text: "Play." }] },
    observations: ["first", "second", "third"].map((text) => ({ role: "user" as const, content: [{ type: "text" as const, text }] })),
    replies: ["<answer>Left</answer>", "<answer>Up</answer>"],
    success: true,
  };
  const trained = (ids: readonly number[], mask: readonly number[]) => ids.filter((_, i) => mask[i] === 1);

  test("no_concat: one sample per turn; only the reply and <|im_end|> are trained", () => {
    const samples = episodeSamples(episode, "no_concat", codec, replies);
    expect(samples).toHaveLength(2);
    samples.forEach((s, t) => {
      expect(trained(s.tokenIds, s.lossMask)).toEqual([...tokenizer.encode(episode.replies[t]!), IM_END]);
      const text = tokenizer.decode(s.tokenIds);
      expect(text).toBe(`<|im_start|>system\nPlay.<|im_end|>\n<|im_start|>user\n${["first", "second"][t]}<|im_end|>\n<|im_start|>assistant\n${episode.replies[t]}<|im_end|>\n`);
    });
  });

  test("observation_only: the template's default system prompt, then the observation", () => {
    const [first] = episodeSamples(episode, "observation_only", codec, replies);
    expect(tokenizer.decode(first!.tokenIds)).toBe(
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nfirst<|im_end|>\n<|im_start|>assistant\n<answer>Left</answer><|im_end|>\n",
    );
  });

  test("observation_only: an observation with an image keeps the image alone", () => {
    const image = { width: 28, height: 28, data: new Uint8Array(28 * 28 * 3).fill(128) };
    const withImage: Episode = {
      ...episode,
      observations: [{ role: "user", content: [{ type: "text", text: "the extracted valid action is ['left']\n" }, { type: "image", image }, { type: "text", text: "Decide" }] }],
      replies: ["<answer>Up</answer>"],
    };
    const [sample] = episodeSamples(withImage, "observation_only", codec, replies);
    const text = tokenizer.decode(sample!.tokenIds);
    expect(text).toMatch(/^<\|im_start\|>system\nYou are a helpful assistant\.<\|im_end\|>\n<\|im_start\|>user\n<\|vision_start\|>(<\|image_pad\|>)+<\|vision_end\|><\|im_end\|>\n<\|im_start\|>assistant\n<answer>Up<\/answer><\|im_end\|>\n$/);
    // no_concat keeps the env's words.
    expect(tokenizer.decode(episodeSamples({ ...withImage, system: episode.system }, "no_concat", codec, replies)[0]!.tokenIds)).toContain("Decide");
  });

  test("concat: one sample holding every turn, every reply trained; the last observation is left out", () => {
    const samples = episodeSamples(episode, "concat", codec, replies);
    expect(samples).toHaveLength(1);
    const s = samples[0]!;
    expect(trained(s.tokenIds, s.lossMask)).toEqual([...tokenizer.encode(episode.replies[0]!), IM_END, ...tokenizer.encode(episode.replies[1]!), IM_END]);
    expect(s.replySpans).toHaveLength(2);
    expect(tokenizer.decode(s.tokenIds)).not.toContain("third");
  });

  test("observation_history: one sample of the whole episode, the template's default system prompt, each observation's image alone, every reply trained", () => {
    const image = { width: 28, height: 28, data: new Uint8Array(28 * 28 * 3).fill(128) };
    const seen = (words: string) => ({ role: "user" as const, content: [{ type: "text" as const, text: words }, { type: "image" as const, image }, { type: "text" as const, text: "Decide" }] });
    const withImages: Episode = { ...episode, observations: [seen("Start."), seen("the extracted valid action is ['left']"), seen("the extracted valid action is ['up']")] };
    const samples = episodeSamples(withImages, "observation_history", codec, replies);
    expect(samples).toHaveLength(1);
    const s = samples[0]!;
    expect(trained(s.tokenIds, s.lossMask)).toEqual([...tokenizer.encode(episode.replies[0]!), IM_END, ...tokenizer.encode(episode.replies[1]!), IM_END]);
    const image_ = "<\\|vision_start\\|>(<\\|image_pad\\|>)+<\\|vision_end\\|>";
    const user = `<\\|im_start\\|>user\\n${image_}<\\|im_end\\|>\\n`;
    const reply = (text: string) => `<\\|im_start\\|>assistant\\n${text}<\\|im_end\\|>\\n`;
    expect(tokenizer.decode(s.tokenIds)).toMatch(
      new RegExp(`^<\\|im_start\\|>system\\nYou are a helpful assistant\\.<\\|im_end\\|>\\n${user}${reply("<answer>Left</answer>")}${user}${reply("<answer>Up</answer>")}$`),
    );
    // The env's words and the observation after the last reply are left out.
    expect(tokenizer.decode(s.tokenIds)).not.toMatch(/Decide|extracted|Play/);
  });
});
