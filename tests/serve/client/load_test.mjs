// A bounded load test with no dependency beyond node: a burst of 64 requests at once, then 96
// requests, 32 at a time, mixing chat and text completions, whole and streamed, against the real
// server with a queue large enough for all of them. Every response must be a complete 200 (no 5xx at all); then SIGTERM must end
// the server with exit code 0 within seconds.
import { assert, deadline, makeModel, options, startServer } from './harness.mjs';

const { bin, work } = options();
const model = makeModel(bin, work);
const server = await startServer(bin, model, ['--parallel', '8', '--queue', '256']);
// A hang guard. On lavapipe with 2 cores the run takes about 1 minute in Release and 2-3 minutes
// under the sanitizers beside another test; the CI machine may be slower still.
deadline(420, server.kill);

const TOTAL = 96;
const CONCURRENCY = 32;

// One request; throws unless the answer is complete.
async function one(i) {
  const chat = i % 2 === 0;
  const stream = i % 4 >= 2;
  const max_tokens = i % 3 === 0 ? 2 : 1;  // a third also take a decode step; prefill is most of the time
  const body = chat
    ? { model: 'tiny', messages: [{ role: 'user', content: `Request ${i}` }], max_tokens, seed: i, stream }
    : { model: 'tiny', prompt: `Request ${i}`, max_tokens, seed: i, stream };
  const res = await fetch(`${server.base}/v1/${chat ? 'chat/completions' : 'completions'}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  assert.equal(res.status, 200, `request ${i}: ${res.status} ${text}`);
  if (!stream) {
    const j = JSON.parse(text);
    assert.ok(['stop', 'length'].includes(j.choices[0].finish_reason), text);
    assert.ok(j.usage.completion_tokens >= 1 && j.usage.completion_tokens <= max_tokens, text);
    return;
  }
  assert.ok(text.endsWith('data: [DONE]\n\n'), `request ${i}: stream not ended: ${text}`);
  const events = text.split('\n\n').filter((e) => e.startsWith('data: {')).map((e) => JSON.parse(e.slice(6)));
  assert.ok(events.some((e) => e.choices[0]?.finish_reason), `request ${i}: no finish_reason: ${text}`);
}

// A burst first: BURST clients connecting at the same instant, as many streams starting together
// do (a small listen backlog resets some of them).
const BURST = 64;
const tBurst = Date.now();
const burst = await Promise.allSettled(Array.from({ length: BURST }, (_, i) => one(TOTAL + i)));
const burstFailures = burst.filter((r) => r.status === 'rejected').map((r) => String(r.reason?.message ?? r.reason));
console.log(`a burst of ${BURST} requests at once in ${((Date.now() - tBurst) / 1000).toFixed(1)} s: ${burstFailures.length} failed`);
for (const f of burstFailures.slice(0, 5)) console.log(`  ${f}`);

const t0 = Date.now();
let next = 0;
const statuses = [];
await Promise.all(
  Array.from({ length: CONCURRENCY }, async () => {
    while (next < TOTAL) {
      const i = next++;
      try {
        await one(i);
        statuses.push('ok');
      } catch (e) {
        statuses.push(String(e.message ?? e));
      }
    }
  }),
);
const seconds = (Date.now() - t0) / 1000;
const failures = statuses.filter((s) => s !== 'ok');
console.log(`${TOTAL} requests at ${CONCURRENCY} concurrency in ${seconds.toFixed(1)} s: ${failures.length} failed`);
for (const f of failures.slice(0, 5)) console.log(`  ${f}`);

const metrics = await (await fetch(`${server.base}/metrics`)).text();
const finished = Number(metrics.match(/^bdsl_requests_finished_total (\S+)$/m)[1]);
const { code, signal, seconds: stopSeconds } = await server.stop();
console.log(`SIGTERM: exit code ${code} (signal ${signal}) after ${stopSeconds.toFixed(2)} s`);

let ok = failures.length === 0 && statuses.length === TOTAL && burstFailures.length === 0;
if (finished !== TOTAL + BURST) console.log(`FAIL: /metrics counts ${finished} finished requests, not ${TOTAL + BURST}`), (ok = false);
if (code !== 0 || signal !== null || stopSeconds >= 5) console.log(`FAIL: stop\n${server.stderr()}`), (ok = false);
console.log(ok ? 'ok' : 'FAIL');
process.exit(ok ? 0 : 1);
