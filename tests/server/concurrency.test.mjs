// concurrency.test.mjs — 32 concurrent streaming clients, clients that go away mid-stream or
// while queued, the bounded queue (503 + Retry-After), and a graceful SIGTERM/SIGINT.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Server, MODELS, engineRun, rawHttp, post, sleep } from './lib.mjs';

const client = (srv) => new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });

async function streamText(stream) {
    let text = '';
    let finish = null;
    let n = 0;
    for await (const c of stream) {
        const ch = c.choices[0];
        if (!ch) continue;
        text += ch.text ?? ch.delta?.content ?? '';
        if (ch.finish_reason) finish = ch.finish_reason;
        n++;
    }
    return { text, finish, n };
}

// After an abort the SDK's stream ends (or throws, depending on timing): either is fine.
async function drained(iter) {
    try {
        while (!(await iter.next()).done);
    } catch (e) {
        assert.ok(e.name === 'AbortError' || e instanceof OpenAI.APIUserAbortError, String(e));
    }
}

// Poll /metrics until pred(metrics) holds (or give up after `ms`).
async function waitMetrics(srv, pred, ms = 5000) {
    const t0 = Date.now();
    let m;
    do {
        m = await srv.metrics();
        if (pred(m)) return m;
        await sleep(10);
    } while (Date.now() - t0 < ms);
    return m;
}

describe('32 concurrent streaming clients', () => {
    const srv = new Server(MODELS.stories, ['--parallel', '8', '--queue', '32', '--chat-template', 'llama2']);
    before(async () => srv.start());
    after(async () => assert.deepEqual(await srv.stop(), { code: 0, signal: null }));

    it('every client gets its whole, correct stream', async () => {
        const prompts = ['Once upon a time', 'The little dog', 'Lily and Ben', 'One day'];
        const refs = prompts.map((p) => engineRun(MODELS.stories, p, 48).text);
        const oa = client(srv);
        const runs = Array.from({ length: 32 }, (_, i) => (async () => {
            const chat = i % 4 === 3; // a few chat streams among the completions
            const p = prompts[i % 4];
            const s = chat
                ? await oa.chat.completions.create({ messages: [{ role: 'user', content: p }], max_tokens: 48, temperature: 0, stream: true })
                : await oa.completions.create({ prompt: p, max_tokens: 48, temperature: 0, stream: true });
            return { i, chat, ...(await streamText(s)) };
        })());
        const res = await Promise.all(runs);
        for (const r of res) {
            assert.equal(r.finish, 'length', `client ${r.i} finished`);
            if (!r.chat) assert.equal(r.text, refs[r.i % 4], `client ${r.i} text equals engine run`);
            else assert.ok(r.text.length > 0);
        }
        const chats = res.filter((r) => r.chat).map((r) => r.text);
        assert.equal(new Set(chats).size, 1, 'identical greedy chats agree with each other');
        const m = await waitMetrics(srv, (x) => x.get('hx_requests_in_flight') === 0);
        assert.equal(m.get('hx_requests_in_flight'), 0);
        assert.equal(m.get('hx_active_slots'), 0);
        assert.equal(m.get('hx_queue_depth'), 0);
        assert.equal(m.get('hx_requests_total{route="/v1/completions",status="200"}'), 24);
        assert.equal(m.get('hx_requests_total{route="/v1/chat/completions",status="200"}'), 8);
        assert.equal(m.get('hx_completion_tokens_total'), 32 * 48);
        assert.equal(m.get('hx_time_to_first_token_seconds_count'), 32);
    });
});

describe('clients that go away', () => {
    // One slot, so a slot that is not freed at once blocks the next request.
    const srv = new Server(MODELS.qwen, ['--parallel', '1', '--queue', '4']);
    let oa;
    before(async () => {
        await srv.start();
        oa = client(srv);
    });
    after(async () => assert.deepEqual(await srv.stop(), { code: 0, signal: null }));

    it('a stream aborted mid-way is cancelled and its slot freed', async () => {
        const before = await srv.metrics();
        const ac = new AbortController();
        const s = await oa.completions.create({ prompt: 'Hello', max_tokens: 4000, temperature: 0, stream: true }, { signal: ac.signal });
        let n = 0;
        for await (const c of s) {
            assert.equal(typeof c.choices[0].text, 'string');
            if (++n === 5) {
                ac.abort(); // the socket closes under the stream
                break;
            }
        }
        const m = await waitMetrics(srv, (x) => x.get('hx_generations_cancelled_total') === 1 && x.get('hx_active_slots') === 0);
        assert.equal(m.get('hx_generations_cancelled_total'), 1);
        assert.equal(m.get('hx_active_slots'), 0);
        const gen = m.get('hx_completion_tokens_total') - before.get('hx_completion_tokens_total');
        assert.ok(gen < 4000, `generation stopped early (${gen} of 4000 tokens)`);
        assert.equal(m.get('hx_requests_total{route="/v1/completions",status="499"}'), 1);
        // its access line counts the tokens /metrics counted (written with the cancellation)
        const line = srv.accessLog().find((l) => l.status === 499);
        assert.ok(line, `a 499 line in:\n${srv.log}`);
        assert.equal(line.gen_tokens, gen, 'the access line and /metrics agree');
        assert.ok(line.gen_tokens >= 5 && line.truncated);
        const r = await oa.completions.create({ prompt: 'Hello', max_tokens: 8, temperature: 0 });
        assert.equal(r.usage.completion_tokens, 8, 'the next request gets the slot');
    });

    it('a non-streamed request whose client goes away is cancelled', async () => {
        const before = await srv.metrics();
        const ac = new AbortController();
        const p = oa.completions.create({ prompt: 'Hello', max_tokens: 4000, temperature: 0 }, { signal: ac.signal });
        await waitMetrics(srv, (x) => x.get('hx_active_slots') === 1);
        ac.abort();
        await assert.rejects(p);
        const m = await waitMetrics(srv, (x) => x.get('hx_generations_cancelled_total') === before.get('hx_generations_cancelled_total') + 1 && x.get('hx_active_slots') === 0);
        assert.equal(m.get('hx_active_slots'), 0);
        assert.ok(m.get('hx_completion_tokens_total') - before.get('hx_completion_tokens_total') < 4000);
    });

    it('a queued request whose client goes away never runs', async () => {
        const before = await srv.metrics();
        const acLong = new AbortController();
        const long = await oa.completions.create({ prompt: 'Hello', max_tokens: 4000, temperature: 0, stream: true }, { signal: acLong.signal });
        const it0 = long[Symbol.asyncIterator]();
        await it0.next(); // the long one holds the only slot
        const acQ = new AbortController();
        const queued = oa.completions.create({ prompt: 'Hello again', max_tokens: 16 }, { signal: acQ.signal });
        await waitMetrics(srv, (x) => x.get('hx_queue_depth') === 1);
        acQ.abort();
        await assert.rejects(queued);
        acLong.abort();
        await drained(it0);
        const m = await waitMetrics(srv, (x) => x.get('hx_generations_cancelled_total') === before.get('hx_generations_cancelled_total') + 2);
        assert.equal(m.get('hx_generations_cancelled_total') - before.get('hx_generations_cancelled_total'), 2);
        assert.equal(m.get('hx_queue_depth'), 0);
        assert.equal(m.get('hx_active_slots'), 0);
    });

    it('many clients vanish at once; the server stays correct', async () => {
        const ref = engineRun(MODELS.qwen, 'Hello', 16);
        await Promise.all(Array.from({ length: 8 }, async () => {
            const r = await rawHttp(srv.port, post('/v1/completions', JSON.stringify({ prompt: 'Hello', max_tokens: 3000, stream: true })), { timeoutMs: 30 });
            return r;
        }));
        const m = await waitMetrics(srv, (x) => x.get('hx_requests_in_flight') === 0);
        assert.equal(m.get('hx_requests_in_flight'), 0, 'every vanished request was cancelled');
        assert.equal(m.get('hx_active_slots'), 0);
        assert.equal(m.get('hx_queue_depth'), 0);
        const r = await oa.completions.create({ prompt: 'Hello', max_tokens: 16, temperature: 0, return_token_ids: true });
        assert.deepEqual(r.choices[0].token_ids, ref.ids);
    });
});

describe('a full server answers 503 with Retry-After', () => {
    const srv = new Server(MODELS.qwen, ['--parallel', '1', '--queue', '1']);
    before(async () => srv.start());
    after(async () => assert.deepEqual(await srv.stop(), { code: 0, signal: null }));

    it('beyond --parallel + --queue', async () => {
        const oa = client(srv);
        const acs = [new AbortController(), new AbortController()];
        const a = await oa.completions.create({ prompt: 'Hi', max_tokens: 4000, stream: true }, { signal: acs[0].signal });
        const ia = a[Symbol.asyncIterator]();
        await ia.next();
        const b = oa.completions.create({ prompt: 'Hi', max_tokens: 8 }, { signal: acs[1].signal });
        await waitMetrics(srv, (x) => x.get('hx_queue_depth') === 1);
        const r = await fetch(`${srv.url}/v1/completions`, { method: 'POST', body: '{"prompt":"Hi","max_tokens":4}' });
        assert.equal(r.status, 503);
        assert.equal(r.headers.get('retry-after'), '1');
        const e = (await r.json()).error;
        assert.equal(e.type, 'server_error');
        assert.equal(e.code, 'server_busy');
        acs[0].abort();
        await drained(ia);
        const rb = await b; // the queued one now runs to completion
        assert.equal(rb.usage.completion_tokens, 8);
    });
});

describe('graceful shutdown', () => {
    it('SIGTERM: in-flight streams finish, new connections are refused, exit 0', async () => {
        const srv = await new Server(MODELS.stories, ['--parallel', '2', '--grace', '20']).start();
        const oa = client(srv);
        const ref = engineRun(MODELS.stories, 'Once upon a time', 1000);
        const runs = [0, 1].map(async () => {
            const s = await oa.completions.create({ prompt: 'Once upon a time', max_tokens: 1000, temperature: 0, stream: true });
            const out = [];
            for await (const c of s) {
                out.push(c.choices[0]?.text ?? '');
                await sleep(2); // slow enough that the signal lands mid-stream
            }
            return out.join('');
        });
        const seen = await waitMetrics(srv, (x) => x.get('hx_active_slots') === 2);
        srv.proc.kill('SIGTERM');
        await sleep(100);
        await assert.rejects(fetch(`${srv.url}/health`), 'the listener is closed');
        const texts = await Promise.all(runs);
        for (const t of texts) assert.equal(t, ref.text);
        assert.deepEqual(await srv.wait(), { code: 0, signal: null });
        assert.equal(seen.get('hx_active_slots'), 2, 'both were generating');
        assert.match(srv.log, /draining [12] request/, 'the signal came while they ran');
    });

    it('the grace period running out cancels the rest, visibly; still exit 0', async () => {
        const srv = await new Server(MODELS.qwen, ['--parallel', '1', '--queue', '2', '--grace', '0']).start();
        const oa = client(srv);
        const s = await oa.completions.create({ prompt: 'Hi', max_tokens: 4000, stream: true });
        const it0 = s[Symbol.asyncIterator]();
        await it0.next();
        // waits for the slot; its outcome is kept at once (it may fail before it is looked at)
        const queued = oa.completions.create({ prompt: 'Hi', max_tokens: 8 }).then(() => null, (e) => e);
        await waitMetrics(srv, (x) => x.get('hx_queue_depth') === 1);
        srv.proc.kill('SIGINT');
        let rest = 0;
        // the SDK raises the stream's error event; a stream that just ended would look complete
        await assert.rejects((async () => {
            for (let x = await it0.next(); !x.done; x = await it0.next()) rest++;
        })(), (e) => {
            assert.ok(e instanceof OpenAI.APIError, String(e));
            assert.equal(e.code, 'server_shutdown');
            assert.equal(e.type, 'server_error');
            return true;
        });
        assert.ok(rest < 4000, 'the stream was cut short');
        const qe = await queued;
        assert.ok(qe instanceof OpenAI.APIError, `the queued request failed (${qe})`);
        assert.equal(qe.status, 503);
        assert.equal(qe.code, 'server_shutdown');
        assert.deepEqual(await srv.wait(), { code: 0, signal: null });
        const lines = srv.accessLog().filter((l) => l.route === '/v1/completions');
        assert.deepEqual(lines.map((l) => [l.status, l.truncated]).sort(), [[503, false], [503, true]], srv.log);
    });

    it('SIGTERM while idle exits 0 at once', async () => {
        const srv = await new Server(MODELS.stories, []).start();
        assert.deepEqual(await srv.stop('SIGTERM'), { code: 0, signal: null });
        assert.match(srv.log, /stopped/);
    });
});
