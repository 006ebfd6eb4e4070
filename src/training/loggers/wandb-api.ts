/**
 * The few calls of W&B's HTTP API a training run needs, as W&B's own SDKs make them:
 *
 *   POST {base}/graphql   mutation UpsertBucket    creates the run, or updates it when it
 *                                                  exists (a resumed run: same name)
 *   POST {base}/graphql   query RunUploadUrls      signed URLs for the run's media files
 *   PUT  {signed url}                              the file's bytes
 *   POST {base}/files/{entity}/{project}/{run}/file_stream
 *        {"files": {"wandb-history.jsonl": {"offset": N, "content": [line, ...]},
 *                   "wandb-summary.json":  {"offset": 0, "content": [json]}},
 *         "uploaded": [file names]}        history lines N, N+1, ... of the run
 *        {"complete": true, "exitcode": 0}  the run finished
 *
 * Authentication is HTTP basic with user "api" and the API key as password. Why not
 * the `@wandb/sdk` package: it streams through a worker thread, installs SIGINT/SIGTERM
 * handlers that call process.exit (the trainer's own interrupt handling must finish the
 * step and save a checkpoint), drops everything in offline mode, and has no media files.
 */
import { VERSION } from "../../version.ts";
import { fetchOk, RequestError } from "./retry.ts";

export interface WandbRunRef {
  entity: string;
  project: string;
  /** The run's id (W&B's "name" of a bucket). */
  id: string;
}

export interface UpsertRunInput {
  id: string;
  project: string;
  entity?: string;
  displayName: string;
  /** W&B's config shape: {key: {value: ...}}, as a JSON string. */
  config: string;
  host?: string;
  tags?: string[];
}

const UPSERT_BUCKET = `mutation UpsertBucket($name: String, $project: String, $entity: String, $displayName: String, $config: JSONString, $host: String, $program: String, $jobType: String, $tags: [String!]) {
  upsertBucket(input: {name: $name, modelName: $project, entityName: $entity, displayName: $displayName, config: $config, host: $host, jobProgram: $program, jobType: $jobType, tags: $tags}) {
    bucket { id name displayName project { id name entity { id name } } }
    inserted
  }
}`;

const RUN_UPLOAD_URLS = `query RunUploadUrls($name: String!, $files: [String]!, $entity: String, $run: String!) {
  model(name: $name, entityName: $entity) {
    bucket(name: $run) { id files(names: $files) { uploadHeaders edges { node { name url(upload: true) } } } }
  }
}`;

export class WandbApi {
  readonly #auth: string;
  readonly #cancel = new AbortController();

  constructor(
    readonly baseUrl: string,
    apiKey: string,
    private readonly timeoutMs = 30_000,
  ) {
    this.#auth = `Basic ${Buffer.from(`api:${apiKey}`).toString("base64")}`;
  }

  /** Aborts every request in flight and all later ones (the end of the run stopped waiting). */
  cancel(): void {
    this.#cancel.abort();
  }

  #headers(json = true): Record<string, string> {
    return { Authorization: this.#auth, "User-Agent": `vagen/${VERSION}`, ...(json ? { "Content-Type": "application/json" } : {}) };
  }

  async #graphql<T>(query: string, variables: Record<string, unknown>): Promise<T> {
    const res = await fetchOk(`${this.baseUrl}/graphql`, { method: "POST", headers: this.#headers(), body: JSON.stringify({ query, variables }) }, this.timeoutMs, this.#cancel.signal);
    const body = (await res.json().catch(() => null)) as { data?: T; errors?: { message?: string }[] } | null;
    if (body?.errors?.length || !body?.data) {
      // A GraphQL error is the server saying no (a wrong entity, a project name it refuses): trying again will not help.
      throw new RequestError(`POST ${this.baseUrl}/graphql: ${body?.errors?.map((e) => e.message).join("; ") ?? "no data in the answer"}`, 200, false);
    }
    return body.data;
  }

  /** Creates or updates the run; returns where its files stream to. */
  async upsertRun(input: UpsertRunInput): Promise<WandbRunRef> {
    type Answer = { upsertBucket?: { bucket?: { name?: string; project?: { name?: string; entity?: { name?: string } } } } };
    const data = await this.#graphql<Answer>(UPSERT_BUCKET, {
      name: input.id,
      project: input.project,
      entity: input.entity,
      displayName: input.displayName,
      config: input.config,
      host: input.host,
      program: "vagen train",
      jobType: "train",
      tags: input.tags,
    });
    const bucket = data.upsertBucket?.bucket;
    const entity = bucket?.project?.entity?.name ?? input.entity;
    if (!bucket || !entity) throw new RequestError(`POST ${this.baseUrl}/graphql: UpsertBucket answered without the run's entity`, 200, false);
    return { entity, project: bucket.project?.name ?? input.project, id: bucket.name ?? input.id };
  }

  async fileStream(run: WandbRunRef, body: Record<string, unknown>): Promise<void> {
    const url = `${this.baseUrl}/files/${encodeURIComponent(run.entity)}/${encodeURIComponent(run.project)}/${encodeURIComponent(run.id)}/file_stream`;
    await fetchOk(url, { method: "POST", headers: this.#headers(), body: JSON.stringify(body) }, this.timeoutMs, this.#cancel.signal);
  }

  /** Uploads one run file (its name relative to the run's files, e.g. media/table/x.table.json). */
  async uploadFile(run: WandbRunRef, name: string, bytes: Uint8Array): Promise<void> {
    type Answer = { model?: { bucket?: { files?: { uploadHeaders?: string[]; edges?: { node?: { name?: string; url?: string } }[] } } } };
    const data = await this.#graphql<Answer>(RUN_UPLOAD_URLS, { name: run.project, entity: run.entity, run: run.id, files: [name] });
    const files = data.model?.bucket?.files;
    const url = files?.edges?.find((e) => e.node?.name === name)?.node?.url;
    if (!url) throw new RequestError(`POST ${this.baseUrl}/graphql: RunUploadUrls gave no upload URL for ${name}`, 200, false);
    // Signed URLs carry their own authority: the API key is not sent to storage.
    const headers: Record<string, string> = {};
    for (const h of files?.uploadHeaders ?? []) {
      const at = h.indexOf(":");
      if (at > 0) headers[h.slice(0, at).trim()] = h.slice(at + 1).trim();
    }
    await fetchOk(url, { method: "PUT", headers, body: bytes as Uint8Array<ArrayBuffer> }, this.timeoutMs, this.#cancel.signal);
  }
}
