/**
 * A fake judge: an OpenAI-compatible chat-completions server on 127.0.0.1 whose behaviour
 * depends on the section text in the prompt, so each scenario in one batch is
 * deterministic. It counts attempts per text to script "fail once, then answer".
 */

export type JudgeBehaviour =
  | { kind: "answer"; reply: string }
  | { kind: "status"; status: number; times?: number; then?: string }
  | { kind: "slow"; delayMs: number; reply: string }
  /** Reads the request and never answers: only the judge's timeout ends it. */
  | { kind: "hang" };

export interface FakeJudge {
  baseUrl: string;
  /** Requests seen, per section text. */
  attempts: Map<string, number>;
  authorizations: (string | null)[];
  stop(): void;
}

/** The section text inside main's extraction prompt (between "Text:\n" and "\n\nJSON:"). */
export function sectionText(prompt: string): string {
  const match = /Text:\n([\s\S]*?)\n\nJSON:/.exec(prompt) ?? /The agent wrote:\n([\s\S]*?)\n\n/.exec(prompt);
  return match ? match[1]! : prompt;
}

export function startFakeJudge(behaviour: (text: string) => JudgeBehaviour): FakeJudge {
  const attempts = new Map<string, number>();
  const authorizations: (string | null)[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(request) {
      authorizations.push(request.headers.get("authorization"));
      const body = (await request.json()) as { messages: { content: string | { type: string; text?: string }[] }[] };
      const content = body.messages[0]!.content;
      const prompt = typeof content === "string" ? content : content.map((part) => part.text ?? "").join("");
      const text = sectionText(prompt);
      const attempt = (attempts.get(text) ?? 0) + 1;
      attempts.set(text, attempt);
      const plan = behaviour(text);
      if (plan.kind === "status" && attempt <= (plan.times ?? Infinity)) {
        return new Response(JSON.stringify({ error: { message: `status ${plan.status}` } }), { status: plan.status });
      }
      if (plan.kind === "hang") return new Promise<Response>(() => {});
      if (plan.kind === "slow") await Bun.sleep(plan.delayMs);
      const reply = plan.kind === "status" ? (plan.then ?? "[]") : plan.reply;
      return Response.json({ choices: [{ message: { role: "assistant", content: reply }, finish_reason: "stop" }], usage: { prompt_tokens: 1, completion_tokens: 1 } });
    },
  });
  return { baseUrl: `http://127.0.0.1:${server.port}/v1`, attempts, authorizations, stop: () => server.stop(true) };
}

/** A judge URL where nothing listens (a port just freed), so every request is refused. */
export function refusedJudgeUrl(): string {
  const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("") });
  const url = `http://127.0.0.1:${server.port}/v1`;
  server.stop(true);
  return url;
}
