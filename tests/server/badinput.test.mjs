// badinput.test.mjs — anything a client can send gets a 4xx with a message in OpenAI's error
// shape, never a crash, and never disturbs another client's stream (one runs throughout).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Server, MODELS, engineRun, rawHttp, post, sleep } from './lib.mjs';

// {"error":{"message": non-empty string, "type": string, "param": string|null, "code": string|null}}
function assertErrorShape(bodyText, status) {
    let j;
    assert.doesNotThrow(() => { j = JSON.parse(bodyText); }, `JSON error body: ${bodyText}`);
    assert.deepEqual(Object.keys(j), ['error']);
    const e = j.error;
    assert.deepEqual(Object.keys(e).sort(), ['code', 'message', 'param', 'type']);
    assert.equal(typeof e.message, 'string');
    assert.ok(e.message.length > 0);
    assert.equal(e.type, status === 401 ? 'authentication_error' : status === 404 ? 'not_found_error'
        : status >= 500 ? 'server_error' : 'invalid_request_error');
    assert.ok(e.param === null || typeof e.param === 'string');
    assert.ok(e.code === null || typeof e.code === 'string');
    return e;
}

describe('bad input', () => {
    // --ctx 64 makes "beyond the context" cheap; --timeout 1 makes slow clients quick to test.
    const srv = new Server(MODELS.stories, ['--parallel', '2', '--ctx', '64', '--timeout', '1']);
    let oa;
    let background; // streams that run while the bad requests arrive
    let stopBackground = false;
    let ref;
    before(async () => {
        await srv.start();
        oa = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0 });
        ref = engineRun(MODELS.stories, 'Once upon a time', 58, ['-c', '64']);
        // Greedy streams one after another until the suite ends, so generation runs on the
        // server while the bad requests arrive; every one must equal engine run's text.
        background = (async () => {
            const texts = [];
            while (!stopBackground) {
                let text = '';
                const s = await oa.completions.create({ prompt: 'Once upon a time', max_tokens: 58, temperature: 0, stream: true });
                for await (const c of s) text += c.choices[0]?.text ?? '';
                texts.push(text);
            }
            return texts;
        })();
    });
    after(async () => {
        stopBackground = true;
        const texts = await background;
        const health = (await fetch(`${srv.url}/health`)).status;
        const exit = await srv.stop();
        assert.equal(health, 200);
        assert.deepEqual(exit, { code: 0, signal: null });
        assert.ok(texts.length >= 10, `${texts.length} background streams`);
        for (const t of texts) assert.equal(t, ref.text, 'a concurrent stream was disturbed');
        const fives = srv.log.split('\n').filter((l) => /status=5\d\d/.test(l) && !/GET \/health status=503/.test(l));
        assert.deepEqual(fives, [], 'no 5xx in the access log (but /health while loading)');
    });

    const cases = [
        ['malformed JSON', '{"prompt": "a",', 400, null],
        ['not an object', '[1,2,3]', 400, null],
        ['empty body', '', 400, null],
        ['missing prompt', '{"max_tokens": 3}', 400, 'prompt'],
        ['prompt of the wrong type', '{"prompt": 5}', 400, 'prompt'],
        ['prompt array of two', '{"prompt": ["a", "b"]}', 400, 'prompt'],
        ['max_tokens a string', '{"prompt": "a", "max_tokens": "3"}', 400, 'max_tokens'],
        ['max_tokens fractional', '{"prompt": "a", "max_tokens": 2.5}', 400, 'max_tokens'],
        ['max_tokens zero', '{"prompt": "a", "max_tokens": 0}', 400, 'max_tokens'],
        ['max_tokens enormous', '{"prompt": "a", "max_tokens": 1000000000}', 400, null],
        ['max_tokens beyond 64 bits', '{"prompt": "a", "max_tokens": 1e300}', 400, 'max_tokens'],
        ['negative temperature', '{"prompt": "a", "temperature": -0.5}', 400, 'temperature'],
        ['temperature a string', '{"prompt": "a", "temperature": "hot"}', 400, 'temperature'],
        ['top_p above 1', '{"prompt": "a", "top_p": 1.5}', 400, 'top_p'],
        ['negative top_k', '{"prompt": "a", "top_k": -1}', 400, 'top_k'],
        ['presence_penalty out of range', '{"prompt": "a", "presence_penalty": 3}', 400, 'presence_penalty'],
        ['stream not a boolean', '{"prompt": "a", "stream": "yes"}', 400, 'stream'],
        ['stop of the wrong type', '{"prompt": "a", "stop": 3}', 400, 'stop'],
        ['too many stop strings', `{"prompt": "a", "stop": ${JSON.stringify(Array(9).fill('x'))}}`, 400, 'stop'],
        ['n = 2', '{"prompt": "a", "n": 2}', 400, 'n'],
        ['seed a string', '{"prompt": "a", "seed": "s"}', 400, 'seed'],
        ['model not a string', '{"prompt": "a", "model": 3}', 400, 'model'],
        ['unknown model', '{"prompt": "a", "model": "gpt-17"}', 404, 'model'],
        ['duplicate keys', '{"prompt": "a", "prompt": "b"}', 400, null],
        ['NUL escaped in a string', '{"prompt": "a\\u0000b"}', 400, null],
        ['deep nesting', `{"prompt": "a", "x": ${'['.repeat(5000)}${']'.repeat(5000)}}`, 400, null],
    ];
    for (const [name, body, status, param] of cases) {
        it(`${name} → ${status}`, async () => {
            const r = await rawHttp(srv.port, post('/v1/completions', body));
            assert.equal(r.status, status, r.raw.slice(0, 300));
            const e = assertErrorShape(r.body, status);
            if (param) assert.equal(e.param, param);
        });
    }

    const chatCases = [
        ['missing messages', '{"model": "stories260K"}', 'messages'],
        ['messages not an array', '{"messages": "hi"}', 'messages'],
        ['empty messages', '{"messages": []}', 'messages'],
        ['message without role', '{"messages": [{"content": "hi"}]}', 'messages'],
        ['unknown role', '{"messages": [{"role": "wizard", "content": "hi"}]}', 'messages'],
        ['content a number', '{"messages": [{"role": "user", "content": 7}]}', 'messages'],
        ['image content part', '{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}', 'messages'],
        ['stream_options not an object', '{"messages": [{"role": "user", "content": "hi"}], "stream": true, "stream_options": 1}', 'stream_options'],
    ];
    for (const [name, body, param] of chatCases) {
        it(`chat: ${name} → 400`, async () => {
            const r = await rawHttp(srv.port, post('/v1/chat/completions', body));
            assert.equal(r.status, 400, r.raw.slice(0, 300));
            assert.equal(assertErrorShape(r.body, 400).param, param);
        });
    }

    it('invalid UTF-8 in the body → 400', async () => {
        const body = Buffer.concat([Buffer.from('{"prompt": "a'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}')]);
        const r = await rawHttp(srv.port, post('/v1/completions', body));
        assert.equal(r.status, 400);
        assertErrorShape(r.body, 400);
        const surrogate = await rawHttp(srv.port, post('/v1/completions', '{"prompt": "\\ud800"}'));
        assert.equal(surrogate.status, 400, 'a lone surrogate escape');
    });

    it('a prompt beyond the context → 400 context_length_exceeded', async () => {
        const prompt = 'Once upon a time there was a little girl. '.repeat(20);
        const err = await oa.completions.create({ prompt, max_tokens: 4 }).catch((e) => e);
        assert.ok(err instanceof OpenAI.BadRequestError, String(err));
        assert.equal(err.code, 'context_length_exceeded');
        assert.match(err.message, /context/);
        const streamed = await oa.completions.create({ prompt, max_tokens: 4, stream: true }).catch((e) => e);
        assert.equal(streamed.status, 400, 'a stream is refused before it starts');
    });

    it('prompt + max_tokens beyond the context → 400; up to it → 200', async () => {
        const err = await oa.completions.create({ prompt: 'Once upon a time', max_tokens: 60 }).catch((e) => e);
        assert.equal(err.status, 400);
        assert.equal(err.code, 'context_length_exceeded');
        assert.match(err.message, /5 in the prompt, 60 to generate/);
        const ok = await oa.completions.create({ prompt: 'Once upon a time', max_tokens: 59, temperature: 0 });
        assert.ok(ok.usage.completion_tokens <= 59);
    });

    it('a body over 4 MiB → 413', async () => {
        const big = JSON.stringify({ prompt: 'a'.repeat(5 << 20) });
        const r = await rawHttp(srv.port, post('/v1/completions', big));
        assert.equal(r.status, 413);
        assertErrorShape(r.body, 413);
        const declared = await rawHttp(srv.port, 'POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 99999999\r\n\r\n');
        assert.equal(declared.status, 413, 'refused on the declared length alone');
    });

    it('a large prompt within the body limit but beyond the context → 400', async () => {
        const r = await rawHttp(srv.port, post('/v1/completions', JSON.stringify({ prompt: 'story time '.repeat(300000) })), { timeoutMs: 30000 });
        assert.equal(r.status, 400);
        assert.equal(assertErrorShape(r.body, 400).code, 'context_length_exceeded');
    });

    it('a head over 16 KiB → 431', async () => {
        const r = await rawHttp(srv.port, `GET /health HTTP/1.1\r\nHost: t\r\nX-Big: ${'a'.repeat(20000)}\r\n\r\n`);
        assert.equal(r.status, 431);
        assertErrorShape(r.body, 431);
    });

    it('garbage and truncated request lines → 400', async () => {
        for (const junk of ['GARBAGE\r\n\r\n', 'GET /\x01 HTTP/1.1\r\n\r\n', 'POST /v1/completions HTTP/9.9\r\n\r\n',
            'GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n', '\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03']) {
            const r = await rawHttp(srv.port, junk);
            assert.equal(r.status, 400, JSON.stringify(junk));
            assertErrorShape(r.body, 400);
        }
    });

    it('a chunked request body → 411', async () => {
        const r = await rawHttp(srv.port, 'POST /v1/completions HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n');
        assert.equal(r.status, 411);
        assertErrorShape(r.body, 411);
    });

    it('a request that never arrives whole → 408 after --timeout', async () => {
        const t0 = Date.now();
        const r = await rawHttp(srv.port, 'POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{"pro', { timeoutMs: 8000 });
        assert.equal(r.status, 408);
        assertErrorShape(r.body, 408);
        assert.ok(Date.now() - t0 < 7000, 'answered by the server, not our own timeout');
        const trickle = await rawHttp(srv.port, ['GET /hea', 'lth HT', 'TP/1.1\r\n', 'Host: t\r\n'], { gapMs: 400, timeoutMs: 8000 });
        assert.equal(trickle.status, 408, 'the timeout runs from the first byte');
    });

    it('a truncated request whose client goes away gets no answer and costs nothing', async () => {
        const r = await rawHttp(srv.port, 'POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 50\r\n\r\n{"prompt"', { endAfter: true, timeoutMs: 3000 });
        assert.equal(r.status, 0);
        assert.equal((await fetch(`${srv.url}/health`)).status, 200);
    });

    it('wrong method → 405 with Allow; unknown route → 404', async () => {
        const r = await fetch(`${srv.url}/v1/completions`);
        assert.equal(r.status, 405);
        assert.equal(r.headers.get('allow'), 'POST');
        assertErrorShape(await r.text(), 405);
        const g = await fetch(`${srv.url}/v1/models`, { method: 'POST', body: '{}' });
        assert.equal(g.status, 405);
        const n = await fetch(`${srv.url}/v1/embeddings`, { method: 'POST', body: '{}' });
        assert.equal(n.status, 404);
        assertErrorShape(await n.text(), 404);
    });

    it('pipelined requests on one connection are answered in order', async () => {
        const one = 'GET /health HTTP/1.1\r\nHost: t\r\n\r\n';
        const body = '{"prompt":"Once","max_tokens":3,"seed":1}';
        const two = `POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
        const three = 'GET /v1/models HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n';
        const r = await rawHttp(srv.port, one + two + three);
        const statuses = [...r.raw.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
        assert.deepEqual(statuses, [200, 200, 200]);
        assert.match(r.raw, /"text_completion"[\s\S]*"object":"list"/);
    });

    it('Expect: 100-continue is honoured', async () => {
        const body = '{"prompt":"Once","max_tokens":2}';
        const r = await rawHttp(srv.port, [`POST /v1/completions HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`, body], { gapMs: 100 });
        assert.match(r.raw, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 OK/);
    });
});
