/**
 * Local HTTP stand-ins for W&B and the Hugging Face Hub that record what arrives, for
 * the logger tests (no network: they listen on 127.0.0.1 and stop with the test).
 *
 * W&B: POST /graphql (UpsertBucket, RunUploadUrls), PUT /upload/<name>, POST
 * /files/<entity>/<project>/<run>/file_stream. `failFirst` answers the first N
 * file_stream posts with 500.
 *
 * Hub: GET /api/whoami-v2, POST /api/repos/create, POST /api/models/<repo>/preupload/main,
 * POST /<repo>.git/info/lfs/objects/batch, PUT /lfs/<oid>, POST /api/models/<repo>/commit/main
 * (ndjson), as @huggingface/hub calls them with LFS (not xet) uploads. `failCommits`
 * answers the first N commits with 500.
 */
import { createHash } from "node:crypto";

export interface WandbRecord {
  upserts: { variables: Record<string, unknown>; auth: string | null }[];
  /** Every file_stream body that was accepted, in order. */
  streams: { path: string; body: Record<string, unknown> }[];
  uploads: Map<string, Uint8Array>;
  rejected: number;
}

export function wandbStandIn(opts: { failFirst?: number; entity?: string } = {}) {
  const rec: WandbRecord = { upserts: [], streams: [], uploads: new Map(), rejected: 0 };
  let fails = opts.failFirst ?? 0;
  const server: ReturnType<typeof Bun.serve> = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req): Promise<Response> {
      const url = new URL(req.url);
      if (req.method === "POST" && url.pathname === "/graphql") {
        const body = (await req.json()) as { query: string; variables: Record<string, unknown> };
        if (body.query.includes("upsertBucket")) {
          rec.upserts.push({ variables: body.variables, auth: req.headers.get("authorization") });
          const v = body.variables;
          return Response.json({ data: { upsertBucket: { bucket: { id: "b1", name: v.name, displayName: v.displayName, project: { id: "p1", name: v.project, entity: { id: "e1", name: v.entity ?? opts.entity ?? "team" } } }, inserted: true } } });
        }
        if (body.query.includes("RunUploadUrls")) {
          const files = body.variables.files as string[];
          return Response.json({ data: { model: { bucket: { id: "b1", files: { uploadHeaders: ["Content-Type:application/octet-stream"], edges: files.map((name): { node: { name: string; url: string } } => ({ node: { name, url: `http://127.0.0.1:${server.port}/upload/${name}` } })) } } } } });
        }
        return Response.json({ errors: [{ message: "unknown query" }] });
      }
      if (req.method === "PUT" && url.pathname.startsWith("/upload/")) {
        rec.uploads.set(url.pathname.slice("/upload/".length), new Uint8Array(await req.arrayBuffer()));
        return new Response("ok");
      }
      if (req.method === "POST" && url.pathname.endsWith("/file_stream")) {
        if (fails > 0) {
          fails--;
          rec.rejected++;
          return new Response("down for maintenance", { status: 500 });
        }
        rec.streams.push({ path: url.pathname, body: (await req.json()) as Record<string, unknown> });
        return Response.json({ exitcode: null, limits: {} });
      }
      return new Response("not found", { status: 404 });
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}`,
    rec,
    /** History rows in server order, parsed, with the offset each arrived at. */
    history(): { offset: number; row: Record<string, unknown> }[] {
      const out: { offset: number; row: Record<string, unknown> }[] = [];
      for (const s of rec.streams) {
        const h = (s.body.files as Record<string, { offset: number; content: string[] }> | undefined)?.["wandb-history.jsonl"];
        h?.content.forEach((line, i) => out.push({ offset: h.offset + i, row: JSON.parse(line.replace(/\bNaN\b|-?Infinity\b/g, "null")) }));
      }
      return out;
    },
    stop: () => server.stop(true),
  };
}

export interface HubRecord {
  requests: { method: string; path: string; auth: string | null }[];
  created: Record<string, unknown>[];
  /** LFS objects by sha256, as PUT. */
  lfs: Map<string, Uint8Array>;
  /** Accepted commits: path -> content bytes (regular files) or the LFS oid. */
  commits: { title: string; files: Map<string, { bytes?: Uint8Array; oid?: string }> }[];
}

export function hubStandIn(opts: { user?: string; failCommits?: number } = {}) {
  const rec: HubRecord = { requests: [], created: [], lfs: new Map(), commits: [] };
  let fails = opts.failCommits ?? 0;
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const url = new URL(req.url);
      rec.requests.push({ method: req.method, path: url.pathname, auth: req.headers.get("authorization") });
      if (url.pathname === "/api/whoami-v2") return Response.json({ name: opts.user ?? "alice", type: "user", auth: { type: "access_token", accessToken: { displayName: "t", role: "write" } } });
      if (url.pathname === "/api/repos/create") {
        const body = (await req.json()) as Record<string, unknown>;
        const seen = rec.created.some((c) => c.name === body.name && c.organization === body.organization);
        rec.created.push(body);
        return seen ? Response.json({ error: "You already created this model repo" }, { status: 409 }) : Response.json({ url: `${url.origin}/${body.organization}/${body.name}`, id: "r1" });
      }
      if (url.pathname.includes("/preupload/")) {
        const body = (await req.json()) as { files: { path: string }[] };
        return Response.json({ files: body.files.map((f) => ({ path: f.path, uploadMode: f.path.endsWith(".safetensors") ? "lfs" : "regular" })) });
      }
      if (url.pathname.endsWith(".git/info/lfs/objects/batch")) {
        const body = (await req.json()) as { objects: { oid: string; size: number }[] };
        return Response.json({ transfer: "basic", objects: body.objects.map((o) => ({ oid: o.oid, size: o.size, actions: { upload: { href: `${url.origin}/lfs/${o.oid}` } } })) });
      }
      if (req.method === "PUT" && url.pathname.startsWith("/lfs/")) {
        const bytes = new Uint8Array(await req.arrayBuffer());
        const oid = url.pathname.slice("/lfs/".length);
        if (createHash("sha256").update(bytes).digest("hex") !== oid) return new Response("sha mismatch", { status: 400 });
        rec.lfs.set(oid, bytes);
        return new Response("ok");
      }
      if (url.pathname.includes("/commit/")) {
        if (fails > 0) {
          fails--;
          return new Response("try later", { status: 500 });
        }
        const lines = (await req.text()).trim().split("\n").map((l) => JSON.parse(l) as { key: string; value: Record<string, string> });
        const files = new Map<string, { bytes?: Uint8Array; oid?: string }>();
        for (const { key, value } of lines) {
          if (key === "file") files.set(value.path!, { bytes: Uint8Array.from(Buffer.from(value.content!, "base64")) });
          if (key === "lfsFile") files.set(value.path!, { oid: value.oid });
        }
        rec.commits.push({ title: String(lines[0]?.value.summary), files });
        return Response.json({ commitOid: "c0ffee", commitUrl: `${url.origin}/commit/c0ffee` });
      }
      return new Response("not found", { status: 404 });
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, rec, stop: () => server.stop(true) };
}

/** A port nothing listens on (bound, then closed). */
export function deadUrl(): string {
  const s = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("") });
  const port = s.port;
  s.stop(true);
  return `http://127.0.0.1:${port}`;
}

/** Every file under `dir`, read as text (for "no secret was written" checks). */
export async function allText(dir: string): Promise<string> {
  const { readdirSync, readFileSync, statSync } = await import("node:fs");
  const { join } = await import("node:path");
  const walk = (d: string): string[] => readdirSync(d).flatMap((n) => (statSync(join(d, n)).isDirectory() ? walk(join(d, n)) : [join(d, n)]));
  return walk(dir).map((f) => readFileSync(f).toString("latin1")).join("\n");
}
