/**
 * The run-folder lock: one holder at a time, the holder named to whoever is refused, a
 * dead holder's lock taken over, and release that is idempotent, never removes someone
 * else's lock, and happens at process exit.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { VagenError } from "../../src/core/errors.ts";
import { LOCK_FILE, acquireRunLock } from "../../src/training/run-lock.ts";

const LOCK_MODULE = join(import.meta.dir, "..", "..", "src", "training", "run-lock.ts");
const temporaries: string[] = [];
afterEach(() => {
  for (const dir of temporaries.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function runDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "vagen-run-lock-"));
  temporaries.push(dir);
  return dir;
}

const holderOf = (dir: string) => JSON.parse(readFileSync(join(dir, LOCK_FILE), "utf8")) as { pid: number; host: string; started: string; token: string };

function refusal(dir: string): VagenError {
  try {
    acquireRunLock(dir).release();
  } catch (err) {
    expect(err).toBeInstanceOf(VagenError);
    return err as VagenError;
  }
  throw new Error("expected the lock to be refused");
}

/** A pid that belonged to a process that has exited (and was reaped). */
async function deadPid(): Promise<number> {
  const child = Bun.spawn(["true"]);
  await child.exited;
  return child.pid;
}

/**
 * A separate bun process that takes the lock, prints "locked", and waits for a line on
 * stdin; then it exits normally (no explicit release: the exit hook must do it).
 */
function lockingChild(dir: string) {
  const script = `import { acquireRunLock } from ${JSON.stringify(LOCK_MODULE)};
acquireRunLock(${JSON.stringify(dir)});
console.log("locked");
for await (const _ of console) process.exit(0);`;
  return Bun.spawn(["bun", "-e", script], { stdin: "pipe", stdout: "pipe", stderr: "pipe" });
}

async function firstLine(stream: ReadableStream<Uint8Array>): Promise<string> {
  const reader = stream.getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return text.trim();
}

describe("acquireRunLock", () => {
  test("the lock file names the holder; a second acquirer is refused with the holder's pid; release frees the folder", () => {
    const dir = runDir();
    const lock = acquireRunLock(dir);
    expect(lock.path).toBe(join(dir, LOCK_FILE));
    const holder = holderOf(dir);
    expect(holder.pid).toBe(process.pid);
    expect(holder.host).toBe(hostname());
    expect(Number.isNaN(Date.parse(holder.started))).toBe(false);
    const refused = refusal(dir);
    expect(refused.message).toContain(`${dir}: another run is using this run folder (pid ${process.pid}, since ${holder.started}`);
    expect(refused.hint).toContain(`kill ${process.pid}`);
    // The refused attempt left the holder's lock and no temporary file behind.
    expect(holderOf(dir).token).toBe(holder.token);
    expect(readdirSync(dir)).toEqual([LOCK_FILE]);
    lock.release();
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
    const again = acquireRunLock(dir);
    expect(holderOf(dir).token).not.toBe(holder.token);
    again.release();
  });

  test("release is idempotent and never removes a lock that is no longer ours", () => {
    const dir = runDir();
    const lock = acquireRunLock(dir);
    lock.release();
    lock.release();
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
    // Someone else's lock where ours was (ours was removed by hand and another run started).
    const mine = acquireRunLock(dir);
    const theirs = { pid: 1, host: "elsewhere", started: "2020-01-01T00:00:00.000Z", token: "theirs" };
    writeFileSync(join(dir, LOCK_FILE), JSON.stringify(theirs));
    mine.release();
    expect(holderOf(dir)).toEqual(theirs);
  });

  test("a lock left by a process that has exited is stale and taken over", async () => {
    const dir = runDir();
    const pid = await deadPid();
    writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid, host: hostname(), started: "2020-01-01T00:00:00.000Z", token: "dead" }));
    const lock = acquireRunLock(dir);
    expect(holderOf(dir).pid).toBe(process.pid);
    expect(holderOf(dir).token).not.toBe("dead");
    expect(readdirSync(dir)).toEqual([LOCK_FILE]);
    lock.release();
  });

  test("a lock naming this pid that this process never took (a reused pid) is stale", () => {
    const dir = runDir();
    writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: process.pid, host: hostname(), started: "2020-01-01T00:00:00.000Z", token: "an-earlier-life" }));
    const lock = acquireRunLock(dir);
    expect(holderOf(dir).token).not.toBe("an-earlier-life");
    lock.release();
  });

  test("a live process of this host, another host, and an unreadable lock are all refused, naming what holds it", async () => {
    const dir = runDir();
    const sleeper = Bun.spawn(["sleep", "30"]);
    try {
      writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: sleeper.pid, host: hostname(), started: "2024-05-01T10:00:00.000Z", token: "alive" }));
      expect(refusal(dir).message).toContain(`(pid ${sleeper.pid}, since 2024-05-01T10:00:00.000Z; lock file ${join(dir, LOCK_FILE)})`);
    } finally {
      sleeper.kill();
      await sleeper.exited;
    }
    writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: 4242, host: "gpu-node-7", started: "2024-05-01T10:00:00.000Z", token: "remote" }));
    const remote = refusal(dir);
    expect(remote.message).toContain("pid 4242 on host gpu-node-7");
    expect(remote.hint).toContain(`remove ${join(dir, LOCK_FILE)}`);
    writeFileSync(join(dir, LOCK_FILE), "{half a lock");
    expect(refusal(dir).message).toBe(`${join(dir, LOCK_FILE)}: the run folder's lock file cannot be read (expected JSON with the holder's pid and host)`);
  });

  test("another process's lock is refused while it runs, and released by its exit", async () => {
    const dir = runDir();
    const child = lockingChild(dir);
    expect(await firstLine(child.stdout)).toBe("locked");
    expect(refusal(dir).message).toContain(`(pid ${child.pid}, since `);
    child.stdin.write("done\n");
    child.stdin.end();
    expect(await child.exited).toBe(0);
    expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
    acquireRunLock(dir).release();
  }, 30_000);

  test("a holder killed with SIGKILL leaves its lock, which the next run takes over", async () => {
    const dir = runDir();
    const child = lockingChild(dir);
    expect(await firstLine(child.stdout)).toBe("locked");
    child.kill("SIGKILL");
    await child.exited;
    expect(holderOf(dir).pid).toBe(child.pid);
    const lock = acquireRunLock(dir);
    expect(holderOf(dir).pid).toBe(process.pid);
    lock.release();
  }, 30_000);
});
