import { describe, expect, test } from "bun:test";
import { parseResponse, splitActions, wrapActions, RESPONSE_FORMATS, type ResponseFormat } from "../../envs/_common/parsers.ts";
import { pythonListRepr } from "../../envs/_common/observation.ts";

const parse = (text: string, format: ResponseFormat, maxActions = 3, actionSep = ",") => parseResponse(text, { format, actionSep, maxActions });

describe("action splitting", () => {
  test("spec worked examples", () => {
    expect(parse("<think>t</think><answer>Up, Left</answer>", "free_think").actions).toEqual(["up", "left"]);
    expect(parse("<think>t</think><answer>Right,Right,Down,Up</answer>", "free_think").actions).toEqual(["right", "right", "down"]);
    expect(parse("<think>t</think><answer>Up Left</answer>", "free_think").actions).toEqual(["up left"]);
    expect(parse("<think>t</think><answer>Up || Left</answer>", "free_think").actions).toEqual(["up || left"]);
    expect(splitActions("move_forward|| turn_left", "|", 5, true).actions).toEqual(["move_forward", "turn_left"]);
  });

  test("truncation rewrites action_content joined by the separator", () => {
    const p = parse("<think>t</think><answer>Right, Right, Down, Up</answer>", "free_think");
    expect(p.action_content).toBe("right,right,down");
    expect(p.llm_response).toBe("<think>t</think><answer>right,right,down</answer>");
  });

  test("empty answer: format correct, no actions", () => {
    const p = parse("<think>t</think><answer> </answer>", "free_think");
    expect(p.format_correct).toBe(true);
    expect(p.actions).toEqual([]);
  });
});

describe("free_think", () => {
  test("leading/trailing junk and whitespace between tags are allowed", () => {
    const p = parse("Sure!\n<think> go up </think>\n\n<answer>Up</answer> thanks", "free_think");
    expect(p).toMatchObject({ format_correct: true, think_content: "go up", action_content: "Up", actions: ["up"] });
  });

  test("missing tags fail without throwing", () => {
    for (const text of ["<answer>Up</answer>", "<think>x</think>", "Up", "", "<think>x</think> words <answer>Up</answer>"]) {
      const p = parse(text, "free_think");
      expect(p.format_correct).toBe(false);
      expect(p.actions).toEqual([]);
      expect(p.think_content).toBe("");
      expect(p.llm_raw_response).toBe(text);
    }
  });

  test("duplicated blocks: the first match wins", () => {
    const p = parse("<think>a</think><answer>Up</answer><think>b</think><answer>Down</answer>", "free_think");
    expect(p.actions).toEqual(["up"]);
    expect(p.think_content).toBe("a");
  });

  test("out of order tags fail; tags are case-sensitive", () => {
    expect(parse("<answer>Up</answer><think>a</think>", "free_think").format_correct).toBe(false);
    expect(parse("<THINK>a</THINK><ANSWER>Up</ANSWER>", "free_think").format_correct).toBe(false);
  });

  test("nested think: the search extends past the inner closing tag, like Python re", () => {
    const p = parse("<think>outer <think>inner</think></think><answer>Left</answer>", "free_think");
    // `</think></think><answer>` is not `</think>\s*<answer>` at the first closing tag, so
    // the search extends the capture to the second one, like Python's re.
    expect(p.format_correct).toBe(true);
    expect(p.think_content).toBe("outer <think>inner</think>");
    expect(p.actions).toEqual(["left"]);
  });
});

describe("wm, wm_think and free_wm (VAGEN main 2026: perception, reasoning, prediction, answer last)", () => {
  const wm = "<perception>box below</perception> <reasoning>push</reasoning>\n<prediction>box on target</prediction><answer>Down</answer>";
  test("wm fills every field", () => {
    const p = parse(wm, "wm");
    expect(p).toMatchObject({
      format_correct: true,
      perception_content: "box below",
      observation_content: "box below",
      think_content: "push",
      reasoning_content: "push",
      prediction_content: "box on target",
      actions: ["down"],
    });
    expect(p.llm_response).toBe("<perception>box below</perception><reasoning>push</reasoning><prediction>box on target</prediction><answer>Down</answer>");
  });

  test("wm is anchored: every tag, in order, nothing but whitespace around them", () => {
    expect(parse("<perception>o</perception><reasoning>t</reasoning><answer>Up</answer>", "wm").format_correct).toBe(false);
    expect(parse("<perception>o</perception><reasoning>t</reasoning><answer>Up</answer><prediction>p</prediction>", "wm").format_correct).toBe(false);
    expect(parse("<perception>o</perception>text<reasoning>t</reasoning><prediction>p</prediction><answer>Up</answer>", "wm").format_correct).toBe(false);
    expect(parse(`note: ${wm}`, "wm").format_correct).toBe(false);
    expect(parse(`${wm} trailing`, "wm").format_correct).toBe(false);
    expect(parse(`\n  ${wm}\n`, "wm").format_correct).toBe(true);
  });

  test("a malformed or legacy-ordered response keeps its salvaged actions without format credit", () => {
    const legacy = parse("<observation>o</observation><think>t</think><answer>Up, Left</answer><prediction>p</prediction>", "wm");
    expect(legacy).toMatchObject({ format_correct: false, actions: ["up", "left"], perception_content: "o", reasoning_content: "t" });
    expect(parse("Answer: Right", "wm")).toMatchObject({ format_correct: false, actions: ["right"] });
  });

  test("wm_think (and its alias free_wm) allows a native thinking block; wm does not", () => {
    const thinking = `<think>hmm</think> draft </think>\n${wm}`;
    expect(parse(thinking, "wm").format_correct).toBe(false);
    for (const format of ["wm_think", "free_wm"] as const) {
      const p = parse(thinking, format);
      expect(p).toMatchObject({ format_correct: true, native_thinking: "hmm</think> draft", actions: ["down"] });
    }
    // The template opened <think>: the response starts inside it.
    expect(parse(`plan first</think>${wm}`, "wm_think")).toMatchObject({ format_correct: true, native_thinking: "plan first" });
  });
});

describe("no_think and eval_mode", () => {
  test("no_think needs the whole response to be the answer", () => {
    expect(parse("  <answer>Up</answer>\n", "no_think").actions).toEqual(["up"]);
    expect(parse("ok <answer>Up</answer>", "no_think").format_correct).toBe(false);
  });

  test("eval_mode takes the first answer anywhere", () => {
    const p = parse("thinking... <answer>Left</answer> and <answer>Up</answer>", "eval_mode");
    expect(p.actions).toEqual(["left"]);
  });

  test("the answer tag can be `action` (Navigation style)", () => {
    const p = parseResponse("<think>t</think><action>move_forward|turn_left</action>", { format: "free_think", actionSep: "|", maxActions: 5, answerTag: "action" });
    expect(p.actions).toEqual(["move_forward", "turn_left"]);
  });
});

describe("paper formats", () => {
  const gw = "<think><observation>box below</observation><reasoning>push</reasoning><prediction>done</prediction></think><answer>Down, Left</answer>";

  test("grounding_worldmodeling: strict full match", () => {
    const p = parse(`  ${gw}\n`, "grounding_worldmodeling");
    expect(p).toMatchObject({ format_correct: true, observation_content: "box below", reasoning_content: "push", prediction_content: "done", actions: ["down", "left"] });
    expect(p.think_content).toBe("<observation>box below</observation><reasoning>push</reasoning><prediction>done</prediction>");
  });

  test("junk around the response breaks format_correct but contents are still extracted", () => {
    const p = parse(`Sure: ${gw}`, "grounding_worldmodeling");
    expect(p.format_correct).toBe(false);
    expect(p.actions).toEqual(["down", "left"]);
  });

  test("<image> is removed first; special tokens are stripped from contents", () => {
    const p = parse("<think><observation>a<image></observation><reasoning>r</reasoning></think><answer>Up</answer>", "grounding");
    expect(p.format_correct).toBe(true);
    expect(p.observation_content).toBe("a");
    expect(p.llm_raw_response).not.toContain("<image>");
    const withToken = parse("<think><reasoning>r <answer> x</reasoning><prediction>p</prediction></think><answer>Up</answer>", "worldmodeling");
    expect(withToken.reasoning_content).toBe("r  x");
  });

  test("truncated actions are re-joined with ' SEP '", () => {
    const p = parse("<think><reasoning>r</reasoning><prediction>p</prediction></think><answer>Up,Up,Left,Down</answer>", "worldmodeling");
    expect(p.actions).toEqual(["up", "up", "left"]);
    expect(p.action_content).toBe("up , up , left");
  });

  test("symbolic and structured variants use the same parsers", () => {
    expect(parse(gw, "grounding_worldmodeling_symbolic").format_correct).toBe(true);
    expect(parse("<think><observation>o</observation><reasoning>r</reasoning></think><answer>Up</answer>", "grounding_structured").format_correct).toBe(true);
  });

  test("missing inner tag fails with empty contents", () => {
    const p = parse("<think><reasoning>r</reasoning></think><answer>Up</answer>", "grounding_worldmodeling");
    expect(p.format_correct).toBe(false);
    expect(p.actions).toEqual([]);
    expect(p.observation_content).toBe("");
  });
});

test("wrapActions produces a response every format accepts", () => {
  for (const format of RESPONSE_FORMATS) {
    const p = parse(wrapActions(format, "Up, Left"), format);
    expect(p.format_correct).toBe(true);
    expect(p.actions).toEqual(["up", "left"]);
  }
});

test("Python list repr of actions", () => {
  expect(pythonListRepr([])).toBe("[]");
  expect(pythonListRepr(["right", "down"])).toBe("['right', 'down']");
  expect(pythonListRepr(["it's"])).toBe(`["it's"]`);
});
