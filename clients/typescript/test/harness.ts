/**
 * A real `portamem serve` for the tests: started on a fresh store in a temporary directory on a free
 * loopback port, with API keys minted by `portamem keys create`, and stopped with SIGINT (as Ctrl-C).
 *
 * The interpreter is $PORTAMEM_PYTHON, else the active virtual environment's (tox's), else the
 * repository's .venv, else python3 on PATH; it needs portamem with the `server` extra (and the
 * `langchain` and `llamaindex` extras for the switching test).
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

/** clients/typescript (the tests run from build-test/test/). */
export const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

export function python(): string {
  const env = process.env;
  if (env["PORTAMEM_PYTHON"]) return env["PORTAMEM_PYTHON"];
  if (env["VIRTUAL_ENV"] && existsSync(join(env["VIRTUAL_ENV"], "bin", "python"))) {
    return join(env["VIRTUAL_ENV"], "bin", "python");
  }
  const repoVenv = join(PACKAGE_ROOT, "..", "..", ".venv", "bin", "python");
  return existsSync(repoVenv) ? repoVenv : "python3";
}

export interface KeyScope {
  users?: string[];
  agents?: string[];
  readOnly?: boolean;
  /** extra scopes: "admin", "debug" */
  scopes?: string[];
}

export interface Served {
  url: string;
  /** the store directory */
  path: string;
  /** what the server printed */
  output: string[];
  /** a new API key of `tenant` with the given scope */
  key(tenant: string, scope?: KeyScope): Promise<string>;
  stop(): Promise<void>;
}

const run = promisify(execFile);

/** `portamem --path <tmp> serve --port 0 <args>`, once it listens. */
export async function startServer(args: string[] = [], timeoutMs = 240_000): Promise<Served> {
  const dir = await mkdtemp(join(tmpdir(), "portamem-ts-"));
  const path = join(dir, "store");
  const output: string[] = [];
  const proc: ChildProcess = spawn(python(), ["-m", "portamem", "--path", path, "serve", "--port", "0", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  createInterface({ input: proc.stderr! }).on("line", (line) => output.push(line));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`portamem serve did not start in time:\n${output.join("\n")}`)), timeoutMs);
    createInterface({ input: proc.stdout! }).on("line", (line) => {
      output.push(line);
      const m = /^portamem serving .* on (http\S+)/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`portamem serve exited (${code}) before listening:\n${output.slice(-40).join("\n")}`));
    });
  });
  const exited = new Promise<void>((resolve) => {
    if (proc.exitCode !== null) resolve();
    else proc.on("exit", () => resolve());
  });
  return {
    url,
    path,
    output,
    async key(tenant: string, scope: KeyScope = {}): Promise<string> {
      const cmd = ["-m", "portamem", "--path", path, "keys", "create", "--for-tenant", tenant, "--json"];
      for (const user of scope.users ?? []) cmd.push("--user", user);
      for (const agent of scope.agents ?? []) cmd.push("--agent", agent);
      if (scope.readOnly) cmd.push("--read-only");
      for (const s of scope.scopes ?? []) cmd.push("--scope", s);
      const { stdout } = await run(python(), cmd);
      return (JSON.parse(stdout.trim().split("\n").pop()!) as { api_key: string }).api_key;
    },
    async stop(): Promise<void> {
      if (proc.exitCode === null) {
        proc.kill("SIGINT");
        const killer = setTimeout(() => proc.kill("SIGKILL"), 60_000);
        await exited;
        clearTimeout(killer);
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A user id of its own for one test, so tests sharing a server do not see each other's memories. */
export function newUser(label: string): string {
  return `${label}-${randomUUID().slice(0, 8)}`;
}

/** Run `fn` until it returns a value `accept` takes, or throw after `timeoutMs`. */
export async function eventually<T>(fn: () => Promise<T>, accept: (value: T) => boolean, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (accept(value)) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms; last value: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
