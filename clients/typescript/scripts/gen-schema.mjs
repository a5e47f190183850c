// Writes openapi.json: the schema a real `portamem serve` publishes at /openapi.json. The server runs on a
// fresh store in a temporary directory and stops again; `npm run gen:types` then turns the schema into
// src/generated/openapi.ts. Both files are checked in, so a change of the API shows in review.
//
// The interpreter is $PORTAMEM_PYTHON, else the active virtual environment's, else the repository's .venv,
// else python3 on PATH; it needs portamem with the `server` extra.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");

export function python() {
  if (process.env.PORTAMEM_PYTHON) return process.env.PORTAMEM_PYTHON;
  if (process.env.VIRTUAL_ENV && existsSync(join(process.env.VIRTUAL_ENV, "bin", "python"))) {
    return join(process.env.VIRTUAL_ENV, "bin", "python");
  }
  const repoVenv = join(root, "..", "..", ".venv", "bin", "python");
  return existsSync(repoVenv) ? repoVenv : "python3";
}

const store = await mkdtemp(join(tmpdir(), "portamem-schema-"));
const server = spawn(python(), ["-m", "portamem", "--path", join(store, "store"), "serve", "--port", "0"], {
  stdio: ["ignore", "pipe", "inherit"],
});
try {
  const url = await new Promise((resolve, reject) => {
    const lines = createInterface({ input: server.stdout });
    lines.on("line", (line) => {
      const m = /^portamem serving .* on (http\S+)/.exec(line);
      if (m) resolve(m[1]);
    });
    server.on("exit", (code) => reject(new Error(`portamem serve exited (${code}) before listening`)));
  });
  const response = await fetch(`${url}/openapi.json`);
  if (!response.ok) throw new Error(`GET /openapi.json answered ${response.status}`);
  const schema = await response.json();
  await writeFile(join(root, "openapi.json"), JSON.stringify(schema, null, 2) + "\n");
  console.log(`openapi.json: ${Object.keys(schema.paths).length} paths from ${url}`);
} finally {
  server.kill("SIGINT");
  await new Promise((resolve) => (server.exitCode !== null ? resolve() : server.on("exit", resolve)));
  await rm(store, { recursive: true, force: true });
}
