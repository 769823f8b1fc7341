// Shared by the serve tests: flags, a tiny model, the real `bitnet-dsl serve` on a free loopback
// port, a minimal test runner with a deadline, and checks of OpenAI's error shape.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import assert from 'node:assert/strict';

export { assert };

export function options() {
  const args = process.argv.slice(2);
  const get = (flag) => {
    const i = args.indexOf(flag);
    if (i < 0 || i + 1 >= args.length) throw new Error(`missing ${flag}`);
    return args[i + 1];
  };
  return { bin: get('--bitnet-dsl'), work: get('--work') };
}

// The npm packages must be installed: a missing one fails the test (it never skips).
export async function importOpenAI() {
  try {
    return (await import('openai')).default;
  } catch (e) {
    console.error(`FAIL: cannot load the 'openai' npm package (${e.message}); run scripts/install-deps.sh`);
    process.exit(1);
  }
}

// Fails the whole run if it is still going after `seconds` (a hung server must not hang ctest).
export function deadline(seconds, cleanup) {
  const timer = setTimeout(() => {
    console.error(`FAIL: still running after ${seconds} s`);
    cleanup?.();
    process.exit(1);
  }, seconds * 1000);
  timer.unref();
}

export function makeModel(bin, work) {
  fs.mkdirSync(work, { recursive: true });
  const model = path.join(work, 'tiny.gguf');
  const r = spawnSync(bin, ['make-model', model, '--preset', 'tiny'], { encoding: 'utf8' });
  assert.equal(r.status, 0, `make-model failed: ${r.stderr}`);
  return model;
}

// Starts `bitnet-dsl serve` on port 0 and waits until /health answers. stop() sends SIGTERM and
// resolves with the exit code and the seconds it took.
export async function startServer(bin, model, extra = []) {
  const proc = spawn(bin, ['serve', '-m', model, '--port', '0', ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  const port = await new Promise((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) resolve(Number(m[1]));
    });
    exited.then(({ code }) => reject(new Error(`serve exited (${code}) before listening:\n${stderr}`)));
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; ++i) {
    try {
      if ((await fetch(`${base}/health`)).ok) break;
    } catch {}
    if (i > 100) throw new Error('/health never answered');
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    proc,
    port,
    base,
    stderr: () => stderr,
    kill: () => proc.kill('SIGKILL'),
    async stop() {
      const t0 = Date.now();
      proc.kill('SIGTERM');
      const { code, signal } = await exited;
      return { code, signal, seconds: (Date.now() - t0) / 1000 };
    },
  };
}

// Sequential tests; the process exits non-zero if any failed.
const tests = [];
export function test(name, fn) {
  tests.push({ name, fn });
}
export async function runTests() {
  let failed = 0;
  for (const t of tests) {
    const t0 = Date.now();
    try {
      await t.fn();
      console.log(`ok   ${t.name} (${Date.now() - t0} ms)`);
    } catch (e) {
      ++failed;
      console.log(`FAIL ${t.name}: ${e.stack ?? e}`);
    }
  }
  console.log(`${tests.length - failed} of ${tests.length} passed`);
  return failed;
}

// A response body must be OpenAI's error object: {"error": {"message", "type", "param", "code"}}.
export function assertOpenAIError(body, { param, code } = {}) {
  assert.ok(body && typeof body.error === 'object', `no error object: ${JSON.stringify(body)}`);
  const e = body.error;
  for (const key of ['message', 'type', 'param', 'code']) assert.ok(key in e, `error without '${key}': ${JSON.stringify(e)}`);
  assert.equal(typeof e.message, 'string');
  assert.ok(e.message.length > 0);
  if (param !== undefined) assert.equal(e.param, param, JSON.stringify(e));
  if (code !== undefined) assert.equal(e.code, code, JSON.stringify(e));
}

export async function postRaw(base, route, body, headers = { 'content-type': 'application/json' }) {
  const res = await fetch(`${base}${route}`, { method: 'POST', headers, body });
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, headers: res.headers, text, json };
}

export const post = (base, route, obj) => postRaw(base, route, JSON.stringify(obj));
