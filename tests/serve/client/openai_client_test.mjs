// The real `bitnet-dsl serve` on loopback, driven by the official `openai` npm package (and by
// fetch and curl where a client would not send such a request): completions and chat, whole and
// streamed, seeds, cancellation, every kind of bad input, a full queue, and a graceful stop.
import { spawnSync } from 'node:child_process';
import {
  assert, assertOpenAIError, deadline, importOpenAI, makeModel, options, post, postRaw, runTests, startServer, test,
} from './harness.mjs';

const OpenAI = await importOpenAI();
const { bin, work } = options();
const model = makeModel(bin, work);
const server = await startServer(bin, model, ['--parallel', '4', '--queue', '4']);
// A hang guard, not a time limit: the cases take ~100 s beside the load test on 2 cores (more sanitized).
deadline(240, server.kill);
const client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 30000 });
const MODEL = 'tiny';
const hello = [{ role: 'user', content: 'Hello, who are you?' }];

async function streamText(stream) {
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta?.content ?? c.text ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, finish, usage };
}

const chatStream = (seed, max_tokens = 12) =>
  client.chat.completions
    .create({ model: MODEL, messages: hello, max_tokens, temperature: 0.9, seed, stream: true })
    .then(streamText);

test('chat completion (whole)', async () => {
  const r = await client.chat.completions.create({ model: MODEL, messages: hello, max_tokens: 8, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.model, MODEL);
  assert.equal(typeof r.created, 'number');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].index, 0);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 0 && r.usage.completion_tokens <= 8);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('chat completion streamed is the same text as whole', async () => {
  const params = { model: MODEL, messages: hello, max_tokens: 10, temperature: 0 };
  const whole = await client.chat.completions.create(params);
  const stream = await client.chat.completions.create({ ...params, stream: true });
  let first = true;
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    assert.match(chunk.id, /^chatcmpl-/);
    if (first) assert.equal(chunk.choices[0].delta.role, 'assistant');
    first = false;
    text += chunk.choices[0].delta.content ?? '';
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
  }
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
});

test('text completion, whole and streamed with usage', async () => {
  const params = { model: MODEL, prompt: 'The model reads the prompt', max_tokens: 6, temperature: 0 };
  const whole = await client.completions.create(params);
  assert.equal(whole.object, 'text_completion');
  assert.match(whole.id, /^cmpl-/);
  assert.equal(typeof whole.choices[0].text, 'string');
  const stream = await client.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  const s = await streamText(stream);
  assert.equal(s.text, whole.choices[0].text);
  assert.equal(s.finish, whole.choices[0].finish_reason);
  assert.deepEqual(s.usage, whole.usage);
});

test('a stop string ends the text and is not returned', async () => {
  const params = { model: MODEL, prompt: 'The model reads the prompt', max_tokens: 24, temperature: 0 };
  const full = (await client.completions.create(params)).choices[0].text;
  const m = full.slice(1).match(/[A-Za-z]{2}/);
  assert.ok(m, `no two letters in ${JSON.stringify(full)}`);
  const stop = m[0];
  const r = await client.completions.create({ ...params, stop: [stop] });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.choices[0].text, full.slice(0, full.indexOf(stop)));
});

test('two concurrent streams with different seeds each give their text alone', async () => {
  const a = await chatStream(1);
  const b = await chatStream(2);
  assert.notEqual(a.text, b.text);
  const [a2, b2] = await Promise.all([chatStream(1), chatStream(2)]);
  assert.equal(a2.text, a.text);
  assert.equal(b2.text, b.text);
});

// n choices: each with its own seed (the request's plus its index), so choice 0 is the same
// request with n = 1 and choice j the same with seed + j; whole and streamed alike.
test('n choices, whole and streamed', async () => {
  const params = { model: MODEL, messages: hello, max_tokens: 8, temperature: 0.9, seed: 11 };
  const three = await client.chat.completions.create({ ...params, n: 3 });
  assert.deepEqual(three.choices.map((c) => c.index), [0, 1, 2]);
  const alone = await Promise.all([11, 12, 13].map((seed) => client.chat.completions.create({ ...params, seed })));
  alone.forEach((a, j) => {
    assert.equal(three.choices[j].message.content, a.choices[0].message.content, `choice ${j}`);
    assert.equal(three.choices[j].finish_reason, a.choices[0].finish_reason, `choice ${j}`);
  });
  assert.ok(new Set(three.choices.map((c) => c.message.content)).size > 1, 'the seeds differ, and so do the texts');
  assert.equal(three.usage.prompt_tokens, alone[0].usage.prompt_tokens, 'the prompt counts once');
  assert.equal(three.usage.completion_tokens, alone.reduce((sum, a) => sum + a.usage.completion_tokens, 0));
  // Streamed: every choice opens with the role, its chunks carry its index, each ends once.
  const text = ['', '', ''], roles = [0, 0, 0], ends = [0, 0, 0];
  let usage = null;
  const stream = await client.chat.completions.create({ ...params, n: 3, stream: true, stream_options: { include_usage: true } });
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) ++roles[c.index];
      text[c.index] += c.delta.content ?? '';
      if (c.finish_reason) ++ends[c.index];
    }
  }
  assert.deepEqual(text, three.choices.map((c) => c.message.content));
  assert.deepEqual(roles, [1, 1, 1]);
  assert.deepEqual(ends, [1, 1, 1]);
  assert.deepEqual(usage, three.usage);
});

// A prompt too long to ride in the decode steps, asked for n = 3 times: its chunks run once for
// the three choices (/metrics counts the two others' tokens as shared), each choice still the
// text its seed gives alone.
test('n choices of a long prompt read it once', async () => {
  const prompt = Array.from({ length: 90 }, (_, i) => (i * 37 + 11) % 997);
  const params = { model: MODEL, prompt, max_tokens: 6, temperature: 0.9 };
  const alone = [];
  for (const seed of [5, 6, 7]) alone.push(await client.completions.create({ ...params, seed }));
  const shared = await metric('bdsl_prompt_tokens_shared_total');
  const three = await client.completions.create({ ...params, seed: 5, n: 3 });
  alone.forEach((a, j) => assert.equal(three.choices[j].text, a.choices[0].text, `choice ${j}`));
  assert.equal(three.usage.prompt_tokens, prompt.length);
  assert.equal(await metric('bdsl_prompt_tokens_shared_total') - shared, 2 * prompt.length);
});

// Several prompts in one completions request (what evaluation harnesses send in batches):
// choice k is prompt k / n's (k % n)-th, each as if sent alone.
test('several prompts in one completions request', async () => {
  const prompts = ['The model reads the prompt', 'There were three ships'];
  const params = { model: MODEL, max_tokens: 5, temperature: 0.9, seed: 3 };
  const both = await client.completions.create({ ...params, prompt: prompts, n: 2 });
  assert.deepEqual(both.choices.map((c) => c.index), [0, 1, 2, 3]);
  const alone = await Promise.all(
    prompts.flatMap((prompt) => [3, 4].map((seed) => client.completions.create({ ...params, prompt, seed }))));
  alone.forEach((a, k) => assert.equal(both.choices[k].text, a.choices[0].text, `choice ${k}`));
  assert.equal(both.usage.prompt_tokens, alone[0].usage.prompt_tokens + alone[2].usage.prompt_tokens);
  assert.equal(both.usage.completion_tokens, alone.reduce((sum, a) => sum + a.usage.completion_tokens, 0));
  // Scoring a batch of texts: echo with logprobs, prompts as text and as token ids.
  const score = { model: MODEL, max_tokens: 1, temperature: 0, logprobs: 1, echo: true };
  const batch = await client.completions.create({ ...score, prompt: prompts });
  const single = await Promise.all(prompts.map((prompt) => client.completions.create({ ...score, prompt })));
  single.forEach((a, k) => {
    assert.equal(batch.choices[k].text, a.choices[0].text);
    assert.deepEqual(batch.choices[k].logprobs, a.choices[0].logprobs);
  });
  const ids = await client.completions.create({ ...score, prompt: [[1, 2, 3], [4, 5, 6, 7]] });
  assert.deepEqual(ids.choices.map((c) => c.logprobs.tokens.length), [3 + 1, 4 + 1]);
  // Streamed: chunks of both prompts, each choice's text as whole.
  const text = ['', ''];
  for await (const chunk of await client.completions.create({ ...params, prompt: prompts, stream: true }))
    for (const c of chunk.choices) text[c.index] += c.text;
  assert.deepEqual(text, [alone[0].choices[0].text, alone[2].choices[0].text]);
});

// Log-probabilities: each generated token (the end-of-generation token excluded) with its
// alternatives, the same whole or streamed, as OpenAI's clients read them.
const tokenCount = (r) => r.usage.completion_tokens - (r.choices[0].finish_reason === 'stop' ? 1 : 0);

function checkEntry(e, top, greedy) {
  assert.equal(typeof e.token, 'string');
  assert.ok(e.logprob <= 0, JSON.stringify(e));
  assert.ok(e.bytes.every((b) => Number.isInteger(b) && b >= 0 && b < 256));
  assert.equal(e.top_logprobs.length, top);
  let mass = 0;
  for (let i = 0; i < top; ++i) {
    if (i) assert.ok(e.top_logprobs[i - 1].logprob >= e.top_logprobs[i].logprob, JSON.stringify(e.top_logprobs));
    mass += Math.exp(e.top_logprobs[i].logprob);
  }
  assert.ok(mass <= 1 + 1e-5, `alternatives' probabilities sum to ${mass}`);
  if (greedy) {  // the chosen token is the most likely one: the same value
    assert.equal(e.token, e.top_logprobs[0].token);
    assert.equal(e.logprob, e.top_logprobs[0].logprob);
  }
}

test('chat logprobs, whole and streamed', async () => {
  const params = { model: MODEL, messages: hello, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 3 };
  const whole = await client.chat.completions.create(params);
  const content = whole.choices[0].logprobs.content;
  assert.equal(content.length, tokenCount(whole));
  assert.ok(content.length > 0);
  for (const e of content) checkEntry(e, 3, true);
  const streamed = [];
  for await (const chunk of await client.chat.completions.create({ ...params, stream: true }))
    for (const c of chunk.choices) streamed.push(...(c.logprobs?.content ?? []));
  assert.deepEqual(streamed, content);
  // Sampled: the same seed, the same tokens and values; without logprobs, none.
  const sampled = { ...params, temperature: 0.9, seed: 4, top_logprobs: 0 };
  const [a, b] = await Promise.all([client.chat.completions.create(sampled), client.chat.completions.create(sampled)]);
  assert.deepEqual(a.choices[0].logprobs, b.choices[0].logprobs);
  for (const e of a.choices[0].logprobs.content) checkEntry(e, 0, false);
  const none = await client.chat.completions.create({ ...params, logprobs: false, top_logprobs: undefined });
  assert.equal(none.choices[0].logprobs, null);
});

test('completion logprobs, whole and streamed', async () => {
  const params = { model: MODEL, prompt: 'The model reads the prompt', max_tokens: 6, temperature: 0, logprobs: 2 };
  const whole = await client.completions.create(params);
  const lp = whole.choices[0].logprobs;
  const n = tokenCount(whole);
  for (const key of ['tokens', 'token_logprobs', 'top_logprobs', 'text_offset']) assert.equal(lp[key].length, n, key);
  assert.equal(lp.text_offset[0], 0);
  for (let i = 0; i < n; ++i) {
    // Byte offsets in the completion (a token's bytes that are not UTF-8 reach the client as U+FFFD).
    if (i && !lp.tokens[i - 1].includes('\ufffd'))
      assert.equal(lp.text_offset[i] - lp.text_offset[i - 1], Buffer.byteLength(lp.tokens[i - 1]));
    // The alternatives and the chosen token (here the best), OpenAI's {token: logprob}.
    const alternatives = Object.entries(lp.top_logprobs[i]);
    assert.ok(alternatives.length >= 1 && alternatives.length <= 3, JSON.stringify(lp.top_logprobs[i]));
    assert.equal(lp.top_logprobs[i][lp.tokens[i]], lp.token_logprobs[i]);
    assert.equal(Math.max(...alternatives.map(([, v]) => v)), lp.token_logprobs[i]);
  }
  const merged = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  for await (const chunk of await client.completions.create({ ...params, stream: true }))
    for (const c of chunk.choices) if (c.logprobs) for (const key in merged) merged[key].push(...c.logprobs[key]);
  assert.deepEqual(merged, lp);
});

// echo with logprobs (what evaluation harnesses send to score a text): the prompt's tokens with
// their log-probabilities (the first one's null), then the completion's, which are those of the
// same request without echo.
test('echo with logprobs scores the prompt', async () => {
  const prompt = 'The model reads the prompt';
  const params = { model: MODEL, prompt, max_tokens: 3, temperature: 0, logprobs: 1 };
  const plain = await client.completions.create(params);
  const echo = await client.completions.create({ ...params, echo: true });
  assert.equal(echo.choices[0].text, prompt + plain.choices[0].text);
  const lp = echo.choices[0].logprobs, n = echo.usage.prompt_tokens;
  assert.equal(lp.tokens.length, n + tokenCount(plain));
  assert.equal(lp.token_logprobs[0], null);
  assert.equal(lp.top_logprobs[0], null);
  for (let i = 1; i < lp.tokens.length; ++i) assert.ok(lp.token_logprobs[i] <= 0, `${i}: ${lp.token_logprobs[i]}`);
  assert.equal(lp.text_offset[n], Buffer.byteLength(prompt), 'the completion starts after the prompt\'s text');
  const gen = plain.choices[0].logprobs;
  assert.deepEqual(lp.tokens.slice(n), gen.tokens);
  gen.token_logprobs.forEach((v, i) => assert.ok(Math.abs(lp.token_logprobs[n + i] - v) < 1e-3, `${i}: ${lp.token_logprobs[n + i]} vs ${v}`));
  // Token ids as the prompt, alone or in an array of one; a prefix scores its tokens the same.
  const ids = [1, 2, 3, 4, 5];
  const score = async (prompt) =>
    (await client.completions.create({ model: MODEL, prompt, max_tokens: 1, temperature: 0, logprobs: 0, echo: true })).choices[0].logprobs;
  const [a, b, prefix] = await Promise.all([score(ids), score([ids]), score(ids.slice(0, 4))]);
  assert.deepEqual(a, b);
  assert.equal(a.token_logprobs.length, 5 + 1);
  for (let i = 1; i < 4; ++i) assert.ok(Math.abs(a.token_logprobs[i] - prefix.token_logprobs[i]) < 1e-4, `${i}`);
});

test('the model list, and the model by id', async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), [MODEL]);
  const m = await client.models.retrieve(MODEL);
  assert.deepEqual(m, list.data[0]);
  await assert.rejects(client.models.retrieve('gpt-4o'), OpenAI.NotFoundError);
});

// llama-server's /tokenize and /detokenize: the model's own tokens, those a completion reads.
test('tokenize and detokenize', async () => {
  const text = 'The model reads <|eot_id|> the prompt, wörtlich';
  const plain = await post(server.base, '/tokenize', { content: text });
  assert.equal(plain.status, 200, plain.text);
  assert.ok(plain.json.tokens.every(Number.isInteger));
  const back = await post(server.base, '/detokenize', { tokens: plain.json.tokens });
  assert.equal(back.json.content, text);
  const pieces = (await post(server.base, '/tokenize', { content: text, with_pieces: true })).json.tokens;
  assert.deepEqual(pieces.map((p) => p.id), plain.json.tokens);
  // A piece is text, or its bytes where a character is split over tokens (as llama-server's).
  const bytes = pieces.flatMap((p) => (typeof p.piece === 'string' ? [...Buffer.from(p.piece)] : p.piece));
  assert.equal(Buffer.from(bytes).toString(), text);
  assert.ok(pieces.some((p) => Array.isArray(p.piece)), 'the synthetic vocabulary splits ö into its bytes');
  // With add_special (BOS, as a completion's text prompt gets it), the ids are the prompt itself.
  const ids = (await post(server.base, '/tokenize', { content: text, add_special: true })).json.tokens;
  assert.deepEqual(ids.slice(1), plain.json.tokens);
  const params = { model: MODEL, max_tokens: 4, temperature: 0 };
  const [a, b] = await Promise.all([client.completions.create({ ...params, prompt: text }),
                                    client.completions.create({ ...params, prompt: ids })]);
  assert.equal(a.choices[0].text, b.choices[0].text);
  assert.equal(a.usage.prompt_tokens, ids.length);
});

async function metric(name) {
  const text = await (await fetch(`${server.base}/metrics`)).text();
  const m = text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  assert.ok(m, `no ${name} in /metrics`);
  return Number(m[1]);
}

test('an aborted stream frees its slot', async () => {
  const cancelled = await metric('bdsl_requests_cancelled_total');
  const controller = new AbortController();
  const stream = await client.chat.completions.create(
    { model: MODEL, messages: hello, max_tokens: 200, temperature: 0, stream: true },
    { signal: controller.signal },
  );
  let chunks = 0;
  try {
    for await (const _ of stream) if (++chunks === 3) controller.abort();
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIUserAbortError || e.name === 'AbortError', String(e));
  }
  // 200 tokens would take many seconds: the next request completes at once only if the slot is free.
  const t0 = Date.now();
  const r = await client.completions.create({ model: MODEL, prompt: 'Next', max_tokens: 3, temperature: 0 });
  assert.ok(Date.now() - t0 < 4000, `the next request took ${Date.now() - t0} ms`);
  assert.equal(r.choices[0].finish_reason === 'length' || r.choices[0].finish_reason === 'stop', true);
  assert.equal(await metric('bdsl_requests_cancelled_total'), cancelled + 1);
  assert.equal(await metric('bdsl_active_slots'), 0);
});

test('an aborted request that waits for its whole answer frees its slot', async () => {
  const cancelled = await metric('bdsl_requests_cancelled_total');
  const controller = new AbortController();
  const pending = client.completions.create(
    { model: MODEL, prompt: 'A long answer', max_tokens: 200, temperature: 0 },
    { signal: controller.signal, maxRetries: 0 },
  );
  setTimeout(() => controller.abort(), 500);
  await assert.rejects(pending, (e) => e instanceof OpenAI.APIUserAbortError || e.name === 'AbortError');
  // The server notices the closed connection within a poll (250 ms) and the scheduler frees the slot.
  const t0 = Date.now();
  while ((await metric('bdsl_requests_cancelled_total')) === cancelled && Date.now() - t0 < 4000)
    await new Promise((r) => setTimeout(r, 100));
  assert.equal(await metric('bdsl_requests_cancelled_total'), cancelled + 1);
  const r = await client.completions.create({ model: MODEL, prompt: 'Next', max_tokens: 3, temperature: 0 });
  assert.ok(['length', 'stop'].includes(r.choices[0].finish_reason));
  assert.equal(await metric('bdsl_active_slots'), 0);
});

// [route, body, status, param, code]: each must be refused with OpenAI's error shape.
const longPrompt = 'the model reads '.repeat(200);
const badInputs = [
  ['/v1/chat/completions', '{"messages": [', 400, null, 'invalid_json'],
  ['/v1/chat/completions', '[1, 2]', 400, null, 'invalid_json'],
  ['/v1/completions', '{"prompt": "x", "max_tokens": 1e999}', 400, null, 'invalid_json'],
  ['/v1/chat/completions', { model: MODEL }, 400, 'messages', 'missing_required_parameter'],
  ['/v1/chat/completions', { messages: 'hi' }, 400, 'messages', 'invalid_type'],
  ['/v1/chat/completions', { messages: [] }, 400, 'messages', 'empty_array'],
  ['/v1/chat/completions', { messages: [{ role: 'user' }] }, 400, 'messages[0].content', 'missing_required_parameter'],
  ['/v1/chat/completions', { messages: [{ role: 'wizard', content: 'x' }] }, 400, 'messages[0].role', 'invalid_value'],
  ['/v1/chat/completions', { messages: hello, max_tokens: -1 }, 400, 'max_tokens', 'invalid_value'],
  ['/v1/chat/completions', { messages: hello, max_tokens: 1e9 }, 400, 'max_tokens', 'invalid_value'],
  ['/v1/chat/completions', { messages: hello, max_tokens: '5' }, 400, 'max_tokens', 'invalid_type'],
  ['/v1/chat/completions', { messages: hello, temperature: 5 }, 400, 'temperature', 'invalid_value'],
  ['/v1/chat/completions', { messages: hello, temperature: 'hot' }, 400, 'temperature', 'invalid_type'],
  ['/v1/chat/completions', { messages: hello, top_p: 1.5 }, 400, 'top_p', 'invalid_value'],
  ['/v1/chat/completions', { messages: hello, stream: 'yes' }, 400, 'stream', 'invalid_type'],
  ['/v1/chat/completions', { messages: [{ role: 'user', content: longPrompt }] }, 400, 'messages', 'context_length_exceeded'],
  ['/v1/chat/completions', { model: 'gpt-4o', messages: hello }, 404, 'model', 'model_not_found'],
  ['/v1/completions', { max_tokens: 3 }, 400, 'prompt', 'missing_required_parameter'],
  ['/v1/completions', { prompt: 42 }, 400, 'prompt', 'invalid_type'],
  ['/v1/completions', { prompt: longPrompt }, 400, 'prompt', 'context_length_exceeded'],
  ['/v1/completions', { prompt: 'x', stop: ['a', 'b', 'c', 'd', 'e'] }, 400, 'stop', 'invalid_value'],
  ['/v1/completions', { prompt: 'x', n: 0 }, 400, 'n', 'invalid_value'],
  ['/v1/completions', { prompt: 'x', n: 129 }, 400, 'n', 'invalid_value'],
  ['/v1/completions', { prompt: 'x', n: 5 }, 400, 'n', 'invalid_value'],  // more than the queue's 4 places
  ['/v1/completions', { prompt: ['a', 'b', 'c', 'd', 'e'] }, 400, 'prompt', 'invalid_value'],
  ['/v1/completions', { prompt: ['a', [1, 2]] }, 400, 'prompt', 'invalid_type'],
  ['/v1/completions', { prompt: ['a', ''] }, 400, 'prompt', 'invalid_value'],
  ['/v1/completions', { prompt: [[1], []] }, 400, 'prompt', 'invalid_value'],
  ['/v1/completions', { prompt: ['x', longPrompt] }, 400, 'prompt', 'context_length_exceeded'],
  // Not implemented: refused by name, never silently ignored.
  ['/v1/chat/completions', { messages: hello, frequency_penalty: 0.5 }, 400, 'frequency_penalty', 'unsupported_value'],
  ['/v1/chat/completions', { messages: hello, presence_penalty: -1 }, 400, 'presence_penalty', 'unsupported_value'],
  ['/v1/chat/completions', { messages: hello, frequency_penalty: 3 }, 400, 'frequency_penalty', 'invalid_value'],
  ['/v1/chat/completions', { messages: hello, logit_bias: { 5: 10 } }, 400, 'logit_bias', 'unsupported_value'],
  ['/v1/chat/completions', { messages: hello, logprobs: true, top_logprobs: 21 }, 400, 'top_logprobs', 'invalid_value'],
  ['/v1/chat/completions', { messages: hello, top_logprobs: 2 }, 400, 'top_logprobs', 'invalid_value'],
  ['/v1/chat/completions', { messages: hello, logprobs: 'yes' }, 400, 'logprobs', 'invalid_type'],
  ['/v1/completions', { prompt: 'x', logprobs: 6 }, 400, 'logprobs', 'invalid_value'],
  ['/v1/completions', { prompt: 'x', logprobs: true }, 400, 'logprobs', 'invalid_type'],
  ['/v1/chat/completions', { messages: hello, logit_bias: [] }, 400, 'logit_bias', 'invalid_type'],
  ['/v1/chat/completions', { messages: hello, tools: [{ type: 'function', function: { name: 'f' } }] }, 400, 'tools', 'unsupported_value'],
  ['/v1/chat/completions', { messages: hello, tools: {} }, 400, 'tools', 'invalid_type'],
  ['/v1/chat/completions', { messages: hello, functions: [{ name: 'f' }] }, 400, 'functions', 'unsupported_value'],
  ['/v1/chat/completions', { messages: hello, tool_choice: 'required' }, 400, 'tool_choice', 'unsupported_value'],
  ['/v1/chat/completions', { messages: hello, function_call: { name: 'f' } }, 400, 'function_call', 'unsupported_value'],
  ['/v1/chat/completions', { messages: hello, response_format: { type: 'json_object' } }, 400, 'response_format', 'unsupported_value'],
  ['/v1/chat/completions', { messages: hello, response_format: 'json' }, 400, 'response_format', 'invalid_type'],
  ['/v1/chat/completions', { messages: hello, modalities: ['text', 'audio'] }, 400, 'modalities', 'unsupported_value'],
  ['/v1/chat/completions', { messages: hello, audio: { voice: 'alloy', format: 'wav' } }, 400, 'audio', 'unsupported_value'],
  ['/v1/completions', { prompt: 'x', echo: true, stream: true }, 400, 'echo', 'unsupported_value'],
  ['/v1/completions', { prompt: [1, 'a'] }, 400, 'prompt', 'invalid_type'],
  ['/v1/completions', { prompt: [] }, 400, 'prompt', 'invalid_value'],
  ['/v1/completions', { prompt: [5000] }, 400, null, 'invalid_value'],
  ['/v1/completions', { prompt: 'x', suffix: 'the end' }, 400, 'suffix', 'unsupported_value'],
  ['/v1/completions', { prompt: 'x', best_of: 3 }, 400, 'best_of', 'unsupported_value'],
  ['/v1/nothing-here', { prompt: 'x' }, 404, null, 'unknown_url'],
  ['/tokenize', {}, 400, 'content', 'missing_required_parameter'],
  ['/tokenize', { content: 5 }, 400, 'content', 'invalid_type'],
  ['/tokenize', { content: 'x', with_pieces: 'yes' }, 400, 'with_pieces', 'invalid_type'],
  ['/tokenize', '["x"]', 400, null, 'invalid_json'],
  ['/detokenize', { tokens: 'x' }, 400, 'tokens', 'invalid_type'],
  ['/detokenize', { tokens: [1, -1] }, 400, 'tokens', 'invalid_value'],
  ['/detokenize', { tokens: [1, 1e9] }, 400, 'tokens', 'invalid_value'],
  ['/detokenize', { tokens: [1.5] }, 400, 'tokens', 'invalid_type'],
];

test('bad input is a 4xx with an OpenAI error, and the server keeps serving', async () => {
  for (const [route, body, status, param, code] of badInputs) {
    const r = typeof body === 'string' ? await postRaw(server.base, route, body) : await post(server.base, route, body);
    assert.equal(r.status, status, `${route} ${JSON.stringify(body).slice(0, 80)}: ${r.text}`);
    assertOpenAIError(r.json, { param, code });
    assert.equal((await fetch(`${server.base}/health`)).status, 200);
  }
  // Bytes that are not UTF-8 inside a JSON string.
  const bytes = Buffer.concat([Buffer.from('{"prompt": "caf'), Buffer.from([0xc3, 0x28, 0xff]), Buffer.from('"}')]);
  const r = await postRaw(server.base, '/v1/completions', bytes);
  assert.equal(r.status, 400, r.text);
  assertOpenAIError(r.json, { code: 'invalid_utf8' });
  // The client surfaces them as its own error classes.
  await assert.rejects(client.chat.completions.create({ model: MODEL, messages: hello, temperature: 3 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.status, 400);
    assert.equal(e.param, 'temperature');
    return true;
  });
  await assert.rejects(client.completions.create({ model: 'nope', prompt: 'x' }), OpenAI.NotFoundError);
  const ok = await client.completions.create({ model: MODEL, prompt: 'Still there?', max_tokens: 2, temperature: 0 });
  assert.equal(ok.choices.length, 1);
  // What asks for nothing is accepted: zero penalties, an empty bias, no log probabilities, no
  // tools, plain text; no echo, no suffix, one of one.
  const zeros = await client.chat.completions.create({
    model: MODEL, messages: hello, max_tokens: 2, temperature: 0, frequency_penalty: 0, presence_penalty: 0, logit_bias: {},
    logprobs: false, tools: [], tool_choice: 'none', response_format: { type: 'text' }, modalities: ['text'],
  });
  assert.equal(zeros.choices.length, 1);
  const plain = await client.completions.create({
    model: MODEL, prompt: 'x', max_tokens: 2, temperature: 0, echo: false, suffix: '', best_of: 1,
  });
  assert.equal(plain.choices.length, 1);
});

test('a full queue is a 503 with Retry-After', async () => {
  // Four slots and a queue of 4: of 16 requests at once, at most 8 get in and the rest are refused.
  const body = { model: MODEL, prompt: 'Queue', max_tokens: 12, temperature: 0 };
  const results = await Promise.all(Array.from({ length: 16 }, () => post(server.base, '/v1/completions', body)));
  const refused = results.filter((r) => r.status === 503);
  assert.equal(results.filter((r) => r.status === 200).length + refused.length, 16, results.map((r) => r.status).join());
  assert.ok(refused.length >= 1, results.map((r) => r.status).join());
  for (const r of refused) {
    assert.equal(r.headers.get('retry-after'), '1');
    assertOpenAIError(r.json, { code: 'queue_full' });
  }
  assert.ok((await metric('bdsl_requests_rejected_total')) >= refused.length);
});

test('curl: a completion, a stream and the metrics', () => {
  const curl = (...args) => {
    const r = spawnSync('curl', ['-sS', '--fail-with-body', '--max-time', '30', ...args], { encoding: 'utf8' });
    assert.equal(r.status, 0, `curl ${args.join(' ')}: ${r.stderr}${r.stdout}`);
    return r.stdout;
  };
  const json = curl(`${server.base}/v1/chat/completions`, '-H', 'Content-Type: application/json',
    '-d', JSON.stringify({ model: MODEL, messages: hello, max_tokens: 4, temperature: 0 }));
  assert.equal(JSON.parse(json).object, 'chat.completion');
  const sse = curl('-N', `${server.base}/v1/completions`, '-H', 'Content-Type: application/json',
    '-d', JSON.stringify({ prompt: 'Stream', max_tokens: 3, stream: true }));
  assert.match(sse, /^data: \{.*"object":"text_completion"/m);
  assert.ok(sse.endsWith('data: [DONE]\n\n'), sse);
  assert.match(curl(`${server.base}/metrics`), /^bdsl_generated_tokens_total \d+/m);
  assert.match(curl(`${server.base}/health`), /"status":"ok"/);
});

test('SIGTERM ends a running stream and exits 0 within seconds', async () => {
  const stream = await client.chat.completions.create({ model: MODEL, messages: hello, max_tokens: 200, temperature: 0, stream: true });
  let chunks = 0;
  let stopped;
  const read = (async () => {
    for await (const _ of stream) if (++chunks === 2) stopped = server.stop();
  })();
  // The stream ends with OpenAI's error event, which the client raises.
  await assert.rejects(read, /shutting down/);
  assert.ok(chunks >= 2);
  const { code, signal, seconds } = await stopped;
  assert.equal(signal, null);
  assert.equal(code, 0, server.stderr());
  assert.ok(seconds < 5, `took ${seconds} s`);
});

const failed = await runTests();
if (server.proc.exitCode === null) server.kill();
process.exit(failed ? 1 : 0);
