// api.test.mjs — `engine serve` through the official OpenAI client: completions and chat with
// and without streaming, models list, greedy output equal to `engine run`, the hx extras.
// Run by tests/test-server-openai.sh (node --test), which installs the client.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Server, MODELS, engineRun, rawHttp, post } from './lib.mjs';

const client = (srv, key = 'none') => new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: key, maxRetries: 0 });

async function collect(stream) {
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    return chunks;
}

describe('completions on stories260K', () => {
    const srv = new Server(MODELS.stories, ['--parallel', '4']);
    let oa;
    const prompt = 'Once upon a time';
    let ref;
    before(async () => {
        await srv.start();
        oa = client(srv);
        ref = engineRun(MODELS.stories, prompt, 40);
        assert.equal(ref.ids.length, 40, 'engine run made 40 tokens');
    });
    after(async () => assert.deepEqual(await srv.stop(), { code: 0, signal: null }));

    it('lists the model', async () => {
        const page = await oa.models.list();
        assert.deepEqual(page.data.map((m) => m.id), ['stories260K']);
        assert.equal(page.data[0].object, 'model');
    });

    it('greedy completion equals engine run (text and ids)', async () => {
        const { data, response } = await oa.completions
            .create({ model: 'stories260K', prompt, max_tokens: 40, temperature: 0, return_token_ids: true })
            .withResponse();
        assert.equal(data.object, 'text_completion');
        assert.equal(data.choices[0].text, ref.text);
        assert.deepEqual(data.choices[0].token_ids, ref.ids);
        assert.equal(data.choices[0].finish_reason, 'length');
        assert.equal(data.usage.completion_tokens, 40);
        assert.equal(data.usage.prompt_tokens, 5); // BOS + 4 (llama2.c's tokenization)
        assert.equal(data.usage.total_tokens, 45);
        assert.match(response.headers.get('x-hx-devices'), /cpu/);
        assert.equal(data.hx.devices, response.headers.get('x-hx-devices'));
        assert.equal(typeof data.hx.policy, 'string');
        assert.ok(data.hx.generation_tokens_per_s > 0 && data.hx.prompt_tokens_per_s > 0);
    });

    it('streamed completion: same text, token by token, usage last', async () => {
        const stream = await oa.completions.create({
            prompt, max_tokens: 40, temperature: 0, stream: true,
            stream_options: { include_usage: true }, return_token_ids: true,
        });
        const chunks = await collect(stream);
        const texts = chunks.filter((c) => c.choices.length && c.choices[0].finish_reason === null);
        assert.ok(texts.length >= 20, `streamed in pieces (${texts.length} chunks)`);
        assert.equal(chunks.map((c) => c.choices[0]?.text ?? '').join(''), ref.text);
        const fin = chunks.find((c) => c.choices[0]?.finish_reason);
        assert.equal(fin.choices[0].finish_reason, 'length');
        assert.deepEqual(fin.choices[0].token_ids, ref.ids);
        const last = chunks[chunks.length - 1];
        assert.deepEqual(last.choices, []);
        // the prompt cache may hold all but the last prompt token (the request above sent it)
        const cached = last.usage.prompt_tokens_details?.cached_tokens;
        assert.ok(Number.isInteger(cached) && cached >= 0 && cached <= 4, `cached_tokens ${cached}`);
        assert.deepEqual(last.usage, { prompt_tokens: 5, completion_tokens: 40, total_tokens: 45,
                                       prompt_tokens_details: { cached_tokens: cached } });
        assert.equal(new Set(chunks.map((c) => c.id)).size, 1, 'one id for the whole stream');
    });

    it('stop strings end the text before the match', async () => {
        const cut = ref.text.indexOf(' ', 12);
        const stop = ref.text.slice(cut, cut + 4);
        const r = await oa.completions.create({ prompt, max_tokens: 40, temperature: 0, stop: [stop] });
        assert.equal(r.choices[0].text, ref.text.slice(0, ref.text.indexOf(stop)));
        assert.equal(r.choices[0].finish_reason, 'stop');
        const s = await collect(await oa.completions.create({ prompt, max_tokens: 40, temperature: 0, stop, stream: true }));
        assert.equal(s.map((c) => c.choices[0]?.text ?? '').join(''), r.choices[0].text);
    });

    it('seeded sampling repeats; temperature > 0 samples', async () => {
        const ask = (seed) => oa.completions.create({ prompt, max_tokens: 24, temperature: 1, seed, return_token_ids: true });
        const [a, b, c] = [await ask(7), await ask(7), await ask(8)];
        assert.deepEqual(a.choices[0].token_ids, b.choices[0].token_ids);
        assert.notDeepEqual(a.choices[0].token_ids, c.choices[0].token_ids);
    });

    it('the prompt as an array of one string', async () => {
        const r = await oa.completions.create({ prompt: [prompt], max_tokens: 40, temperature: 0 });
        assert.equal(r.choices[0].text, ref.text);
    });
});

describe('chat on qwen3-micro (with --api-key)', () => {
    const key = 'sk-test-key';
    const srv = new Server(MODELS.qwen, ['--api-key', key, '--parallel', '2']);
    let oa;
    const messages = [{ role: 'user', content: 'Hello, who are you?' }];
    // Qwen3's ChatML, as the model's template renders one user turn with a generation prompt.
    const rendered = '<|im_start|>user\nHello, who are you?<|im_end|>\n<|im_start|>assistant\n';
    let ref;
    before(async () => {
        await srv.start();
        oa = client(srv, key);
        ref = engineRun(MODELS.qwen, rendered, 32);
    });
    after(async () => assert.deepEqual(await srv.stop('SIGINT'), { code: 0, signal: null }));

    it('greedy chat equals engine run on the rendered prompt', async () => {
        const r = await oa.chat.completions.create({
            model: 'qwen3-micro-q8_0', messages, max_tokens: 32, temperature: 0, return_token_ids: true,
        });
        assert.equal(r.object, 'chat.completion');
        assert.equal(r.choices[0].message.role, 'assistant');
        assert.deepEqual(r.choices[0].token_ids, ref.ids);
        assert.equal(r.choices[0].message.content, ref.text);
        assert.equal(r.usage.completion_tokens, 32);
        assert.equal(r.usage.prompt_tokens, 14);
    });

    it('streamed chat: role first, then the same content, finish, usage', async () => {
        const chunks = await collect(await oa.chat.completions.create({
            messages, max_completion_tokens: 32, temperature: 0, stream: true,
            stream_options: { include_usage: true },
        }));
        assert.equal(chunks[0].object, 'chat.completion.chunk');
        assert.equal(chunks[0].choices[0].delta.role, 'assistant');
        const content = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
        assert.equal(content, ref.text);
        assert.ok(chunks.length > 16, 'token by token');
        assert.equal(chunks.at(-2).choices[0].finish_reason, 'length');
        assert.equal(chunks.at(-1).usage.completion_tokens, 32);
        assert.equal(chunks.at(-1).usage.prompt_tokens, 14);
    });

    it('text content parts are accepted', async () => {
        const r = await oa.chat.completions.create({
            messages: [{ role: 'user', content: [{ type: 'text', text: 'Hello, who are you?' }] }],
            max_tokens: 32, temperature: 0,
        });
        assert.equal(r.choices[0].message.content, ref.text);
    });

    it('a wrong API key is refused with 401 in the OpenAI shape', async () => {
        const bad = client(srv, 'sk-wrong');
        await assert.rejects(bad.chat.completions.create({ messages, max_tokens: 2 }), (e) => {
            assert.ok(e instanceof OpenAI.AuthenticationError, String(e));
            assert.equal(e.status, 401);
            assert.equal(e.type, 'authentication_error');
            assert.equal(e.code, 'invalid_api_key');
            assert.match(e.error.message, /API key/);
            return true;
        });
        await assert.rejects(bad.models.list(), (e) => e.status === 401);
        await assert.rejects(bad.completions.create({ prompt: 'x', max_tokens: 2 }), (e) => e.status === 401);
        const r = await fetch(`${srv.url}/v1/models`);
        assert.equal(r.status, 401, 'no key at all');
        assert.equal((await fetch(`${srv.url}/health`)).status, 200, '/health needs no key');
    });

    it('models list with the key', async () => {
        const page = await oa.models.list();
        assert.equal(page.data[0].id, 'qwen3-micro-q8_0');
    });
});

describe('chat on the ternary qwen3 model', () => {
    const srv = new Server(MODELS.tern, ['--chat-template', 'chatml']);
    before(async () => srv.start());
    after(async () => assert.deepEqual(await srv.stop(), { code: 0, signal: null }));

    it('stream and non-stream agree', async () => {
        const oa = client(srv);
        const req = { messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Tell me a story.' }], max_tokens: 24, temperature: 0 };
        const whole = await oa.chat.completions.create(req);
        const parts = await collect(await oa.chat.completions.create({ ...req, stream: true }));
        assert.equal(parts.map((c) => c.choices[0]?.delta?.content ?? '').join(''), whole.choices[0].message.content);
        assert.ok(whole.usage.completion_tokens > 0);
    });
});

describe('chunks arrive while the generation runs', () => {
    // The engine's fault injector makes every cpu split sleep 20 ms first, so 60 tokens take
    // over a second. A server that held the chunks back (or flushed them in bulk at the end)
    // would deliver them all within a few ms of each other; the test compares the spread of
    // the arrival times with the generation time the server itself reports, not with a figure.
    const srv = new Server(MODELS.stories, ['--chat-template', 'llama2'], { HX_FAULT: 'dev=cpu,mode=slow,ms=20' });
    before(async () => srv.start());
    after(async () => assert.deepEqual(await srv.stop(), { code: 0, signal: null }));

    for (const kind of ['completion', 'chat']) {
        it(`${kind}: the first content chunk arrives long before the last token is made`, async () => {
            const oa = client(srv);
            const common = { max_tokens: 60, temperature: 0, stream: true, stream_options: { include_usage: true } };
            const t0 = performance.now();
            const stream = kind === 'chat'
                ? await oa.chat.completions.create({ messages: [{ role: 'user', content: 'Once upon a time' }], ...common })
                : await oa.completions.create({ prompt: 'Once upon a time', ...common });
            const arrivals = [];
            let fin = null;
            let usage = null;
            for await (const c of stream) {
                const ch = c.choices[0];
                if (c.usage) usage = c.usage;
                if (ch?.finish_reason) fin = c;
                else if (ch?.text || ch?.delta?.content) arrivals.push(performance.now() - t0);
            }
            assert.ok(fin && usage, 'the stream finished');
            assert.ok(arrivals.length >= 20, `${arrivals.length} content chunks`);
            const genMs = ((usage.completion_tokens - 1) / fin.hx.generation_tokens_per_s) * 1000;
            const spread = arrivals.at(-1) - arrivals[0];
            const half = arrivals[arrivals.length >> 1] - arrivals[0];
            const figures = `first chunk at ${arrivals[0].toFixed(0)} ms, middle at +${half.toFixed(0)}, last at +${spread.toFixed(0)}; server-side generation ${genMs.toFixed(0)} ms`;
            assert.ok(genMs > 500, `a generation long enough to tell (${figures})`);
            assert.ok(spread >= 0.5 * genMs, `the chunks came as they were made (${figures})`);
            assert.ok(half >= 0.25 * genMs, `not one early chunk and a late burst (${figures})`);
        });
    }
});

describe('SSE keep-alive comments', () => {
    // --keepalive 0: a comment on every 1 s timer tick, so a stream longer than a second has
    // some. A raw stream (to see them) and an OpenAI-client stream (which must read through
    // them) run side by side on the same greedy request.
    const srv = new Server(MODELS.qwen, ['--keepalive', '0', '--parallel', '2']);
    before(async () => srv.start());
    after(async () => assert.deepEqual(await srv.stop(), { code: 0, signal: null }));

    it('are sent on a long stream and do not disturb the client', async () => {
        const req = { prompt: 'Hello', max_tokens: 2000, temperature: 0, stream: true };
        const t0 = Date.now();
        const [raw, text] = await Promise.all([
            rawHttp(srv.port, post('/v1/completions', JSON.stringify(req)), { timeoutMs: 120000 }),
            (async () => {
                let t = '';
                for await (const c of await client(srv).completions.create(req)) t += c.choices[0]?.text ?? '';
                return t;
            })(),
        ]);
        const seconds = (Date.now() - t0) / 1000;
        assert.equal(raw.status, 200);
        const comments = raw.body.match(/\n: keep-alive\n\n/g)?.length ?? 0;
        assert.ok(seconds < 1.5 || comments >= 1, `${comments} comments in a ${seconds} s stream`);
        assert.match(raw.body, /data: \[DONE\]\n\n/);
        // de-chunk and rebuild the text from the raw events
        const events = raw.body.split('\n').filter((l) => l.startsWith('data: {'));
        const rawText = events.map((l) => JSON.parse(l.slice(6)).choices[0]?.text ?? '').join('');
        assert.equal(text, rawText);
        assert.ok(text.length > 500);
    });
});
