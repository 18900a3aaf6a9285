// structured.test.mjs — structured output (`response_format`) through the official OpenAI
// client on a random-weight model: whatever the weights, the constraint alone must make every
// output parse as JSON and validate against its schema (checked with ajv), at temperature 0
// and at temperature 1 with seeds, in chat and plain completions, plain and streamed; the
// max_tokens budget closes the value; refused schemas and formats are 400s naming
// response_format, and the connection goes on serving. Run by tests/test-server-openai.sh.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv2020 from 'ajv/dist/2020.js';
import { Server, MODELS, rawHttp } from './lib.mjs';

const ajv = new Ajv2020({ strict: false, allErrors: true });

// name → schema: every kind the compiler supports (docs/server.md, "Structured output")
const SCHEMAS = {
    person: {
        type: 'object',
        properties: {
            name: { type: 'string', description: 'full name' },
            age: { type: 'integer' },
            email: { type: 'string' },
        },
        required: ['name', 'age'],
        additionalProperties: false,
    },
    nested: {
        type: 'object',
        properties: {
            user: {
                type: 'object',
                properties: {
                    id: { type: 'integer' },
                    profile: {
                        type: 'object',
                        properties: { nick: { type: 'string', maxLength: 12 }, verified: { type: 'boolean' } },
                        required: ['nick', 'verified'],
                    },
                },
                required: ['id', 'profile'],
            },
        },
        required: ['user'],
    },
    array_bounds: { type: 'array', items: { type: 'integer' }, minItems: 2, maxItems: 4 },
    enums: {
        type: 'object',
        properties: {
            color: { enum: ['red', 'green', 'blue'] },
            size: { type: 'string', enum: ['S', 'M', 'L'] },
        },
        required: ['color', 'size'],
    },
    consts: {
        type: 'object',
        properties: { version: { const: 2 }, kind: { const: 'point' } },
        required: ['version', 'kind'],
    },
    string_lengths: {
        type: 'object',
        properties: {
            code: { type: 'string', minLength: 3, maxLength: 3 },
            note: { type: 'string', minLength: 1, maxLength: 5 },
        },
        required: ['code', 'note'],
    },
    numbers: {
        type: 'object',
        properties: { x: { type: 'number' }, y: { type: 'number' } },
        required: ['x', 'y'],
    },
    integers: { type: 'array', items: { type: 'integer' }, maxItems: 5 },
    booleans: {
        type: 'object',
        properties: {
            ok: { type: 'boolean' },
            flags: { type: 'array', items: { type: 'boolean' }, minItems: 1, maxItems: 3 },
        },
        required: ['ok', 'flags'],
    },
    nulls: { type: 'object', properties: { nothing: { type: 'null' } }, required: ['nothing'] },
    defs_ref: {
        $defs: {
            point: {
                type: 'object',
                properties: { x: { type: 'integer' }, y: { type: 'integer' } },
                required: ['x', 'y'],
                additionalProperties: false,
            },
        },
        type: 'object',
        properties: { from: { $ref: '#/$defs/point' }, to: { $ref: '#/$defs/point' } },
        required: ['from', 'to'],
    },
    recursive_tree: {
        $defs: {
            node: {
                type: 'object',
                properties: {
                    value: { type: 'integer' },
                    children: { type: 'array', items: { $ref: '#/$defs/node' }, maxItems: 2 },
                },
                required: ['value'],
            },
        },
        $ref: '#/$defs/node',
    },
    recursive_root: {
        type: 'object',
        properties: {
            v: { type: 'integer' },
            next: { anyOf: [{ $ref: '#' }, { type: 'null' }] },
        },
        required: ['v', 'next'],
    },
    any_of: {
        type: 'object',
        properties: { id: { anyOf: [{ type: 'integer' }, { type: 'string', maxLength: 6 }] } },
        required: ['id'],
    },
    type_arrays: {
        type: 'object',
        properties: { name: { type: ['string', 'null'] }, n: { type: ['integer', 'null'] } },
        required: ['name', 'n'],
    },
    tuple: {
        type: 'array',
        prefixItems: [{ type: 'string' }, { type: 'integer' }, { type: 'boolean' }],
        items: false,
        minItems: 3,
    },
    free_map: { type: 'object', additionalProperties: { type: 'integer' } },
    optional_only: {
        type: 'object',
        properties: { a: { type: 'integer' }, b: { type: 'string', maxLength: 4 }, c: { type: 'boolean' } },
        additionalProperties: false,
    },
    mixed_enum: { enum: ['yes', 'no', 1, null, { k: [1, 2] }] },
    any_value: {},
};
// json_object mode: any JSON object
const JSON_OBJECT = { type: 'object' };

const client = (srv) => new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'none', maxRetries: 0 });
const rf = (name) => ({ type: 'json_schema', json_schema: { name, schema: SCHEMAS[name], strict: true } });
const messages = [{ role: 'user', content: 'Answer in JSON.' }];

function checkJson(text, schema, what) {
    let value;
    assert.doesNotThrow(() => { value = JSON.parse(text); }, `${what}: not JSON: ${JSON.stringify(text)}`);
    const validate = ajv.compile(schema);
    assert.ok(validate(value), `${what}: ${JSON.stringify(text)} does not validate: ${ajv.errorsText(validate.errors)}`);
    return value;
}

describe('structured output on a random-weight model (qwen3-micro)', () => {
    const srv = new Server(MODELS.qwen, ['--parallel', '4']);
    let oa;
    before(async () => {
        await srv.start();
        oa = client(srv);
    });
    after(async () => assert.deepEqual(await srv.stop(), { code: 0, signal: null }));

    it(`${Object.keys(SCHEMAS).length} schemas, chat, temperature 0 and 1: every output parses and validates`, async () => {
        assert.ok(Object.keys(SCHEMAS).length >= 20);
        for (const name of Object.keys(SCHEMAS)) {
            for (const [temperature, seed] of [[0, undefined], [1, 11], [1, 12]]) {
                const r = await oa.chat.completions.create({
                    messages, response_format: rf(name), max_tokens: 300, temperature, seed,
                });
                const what = `${name} (temperature ${temperature}, seed ${seed})`;
                checkJson(r.choices[0].message.content, SCHEMAS[name], what);
                assert.equal(r.choices[0].finish_reason, 'stop', what);
                assert.ok(r.usage.completion_tokens <= 300, what);
            }
        }
    });

    it('the same on /v1/completions, in parallel', async () => {
        await Promise.all(Object.keys(SCHEMAS).map(async (name, i) => {
            const r = await oa.completions.create({
                prompt: 'JSON:', response_format: rf(name), max_tokens: 300, temperature: 1, seed: 100 + i,
            });
            checkJson(r.choices[0].text, SCHEMAS[name], `${name} (completions)`);
            assert.equal(r.choices[0].finish_reason, 'stop', name);
        }));
    });

    it('json_object mode: any JSON object', async () => {
        for (const [temperature, seed] of [[0, undefined], [1, 5], [1, 6]]) {
            const r = await oa.chat.completions.create({
                messages, response_format: { type: 'json_object' }, max_tokens: 200, temperature, seed,
            });
            const v = checkJson(r.choices[0].message.content, JSON_OBJECT, `json_object ${temperature}`);
            assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v));
        }
    });

    it('streamed: the deltas put together parse and validate', async () => {
        for (const name of ['nested', 'recursive_tree']) {
            const stream = await oa.chat.completions.create({
                messages, response_format: rf(name), max_tokens: 300, temperature: 1, seed: 7, stream: true,
            });
            let text = '', finish = null, n = 0;
            for await (const c of stream) {
                if (!c.choices.length) continue;
                text += c.choices[0].delta.content ?? '';
                finish = c.choices[0].finish_reason ?? finish;
                n++;
            }
            assert.ok(n > 3, `streamed in pieces (${n} chunks)`);
            checkJson(text, SCHEMAS[name], `${name} streamed`);
            assert.equal(finish, 'stop');
        }
    });

    it('max_tokens is a budget: the value closes within it', async () => {
        // the shortest sentence of this schema is {"a":""}: 8 bytes, so 8 tokens always do
        const schema = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'] };
        for (const max_tokens of [8, 9, 12, 20]) {
            for (const seed of [1, 2, 3]) {
                const r = await oa.chat.completions.create({
                    messages, max_tokens, temperature: 1, seed,
                    response_format: { type: 'json_schema', json_schema: { name: 's', schema } },
                });
                checkJson(r.choices[0].message.content, schema, `max_tokens ${max_tokens} seed ${seed}`);
                assert.ok(r.usage.completion_tokens <= max_tokens);
            }
        }
    });

    it('a grammar renders the chat with thinking off, as enable_thinking: false does', async () => {
        const base = { messages, max_tokens: 1, temperature: 0 };
        const plain = await oa.chat.completions.create(base);
        const nothink = await oa.chat.completions.create({ ...base, enable_thinking: false });
        const json = await oa.chat.completions.create({ ...base, max_tokens: 40, response_format: { type: 'json_object' } });
        assert.ok(nothink.usage.prompt_tokens > plain.usage.prompt_tokens, 'the empty think block is in the prompt');
        assert.equal(json.usage.prompt_tokens, nothink.usage.prompt_tokens);
    });

    it('a repeated request reuses its cached prompt and gives the same greedy JSON', async () => {
        const req = {
            messages: [{ role: 'system', content: 'You are a JSON generator. '.repeat(8) }, ...messages],
            response_format: rf('defs_ref'), max_tokens: 200, temperature: 0,
        };
        const a = await oa.chat.completions.create(req);
        const b = await oa.chat.completions.create(req);
        assert.ok(b.usage.prompt_tokens_details.cached_tokens > 0, 'the prompt cache was used');
        assert.equal(b.choices[0].message.content, a.choices[0].message.content);
        checkJson(b.choices[0].message.content, SCHEMAS.defs_ref, 'cached');
    });
});

describe('structured output: bad input', () => {
    const srv = new Server(MODELS.qwen, ['--parallel', '2']);
    let oa;
    before(async () => {
        await srv.start();
        oa = client(srv);
    });
    after(async () => assert.deepEqual(await srv.stop(), { code: 0, signal: null }));

    const bad = [
        [{ type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { name: { type: 'string', pattern: '^a' } } } } },
            /response_format\.json_schema\.schema: 'pattern' is not supported \(at \/properties\/name\)/],
        [{ type: 'json_schema', json_schema: { name: 'x', schema: { type: 'number', minimum: 3 } } }, /'minimum' is not supported/],
        [{ type: 'json_schema', json_schema: { name: 'x', schema: { oneOf: [{ type: 'null' }] } } }, /'oneOf' is not supported/],
        [{ type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', minLength: 5, maxLength: 2 } } },
            /'minLength' is greater than 'maxLength'/],
        [{ type: 'json_schema', json_schema: { name: 'x', schema: { $ref: '#/$defs/nope' } } }, /does not resolve/],
        [{ type: 'json_schema', json_schema: { name: 'x', schema: { type: 'wat' } } }, /'type' must be one of/],
        [{ type: 'json_schema', json_schema: { name: 'x', schema: { type: 'array', maxItems: 100000 } } }, /above 10000/],
        [{ type: 'json_schema' }, /response_format\.json_schema must be an object/],
        [{ type: 'xml' }, /response_format\.type must be/],
        ['json', /'response_format' must be an object/],
    ];

    it('unsupported keywords, invalid schemas, bad formats: 400 with param response_format', async () => {
        for (const [format, message] of bad) {
            for (const endpoint of ['chat', 'completions']) {
                const req = { max_tokens: 5, response_format: format };
                const p = endpoint === 'chat'
                    ? oa.chat.completions.create({ ...req, messages })
                    : oa.completions.create({ ...req, prompt: 'x' });
                await assert.rejects(p, (e) => {
                    assert.equal(e.status, 400, JSON.stringify(format));
                    assert.equal(e.error?.param ?? e.param, 'response_format');
                    assert.match(e.message, message);
                    return true;
                });
            }
        }
    });

    it('a refused schema does not disturb the connection: the next request on it is served', async () => {
        const body = (rfmt) => JSON.stringify({ prompt: 'x', max_tokens: 30, temperature: 0, response_format: rfmt });
        const req = (b, last) => `POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n` +
            `Content-Length: ${Buffer.byteLength(b)}\r\n${last ? 'Connection: close\r\n' : ''}\r\n${b}`;
        const badBody = body({ type: 'json_schema', json_schema: { schema: { type: 'string', format: 'email' } } });
        const goodBody = body({ type: 'json_schema', json_schema: { schema: SCHEMAS.array_bounds } });
        const r = await rawHttp(srv.port, req(badBody, false) + req(goodBody, true), { timeoutMs: 20000 });
        const parts = r.raw.split(/(?=HTTP\/1\.1 \d{3} )/);
        assert.equal(parts.length, 2, r.raw);
        assert.match(parts[0], /^HTTP\/1\.1 400 /);
        assert.match(parts[0], /"param":"response_format"/);
        assert.match(parts[0], /'format' is not supported/);
        assert.match(parts[1], /^HTTP\/1\.1 200 /);
        const json = JSON.parse(parts[1].slice(parts[1].indexOf('\r\n\r\n') + 4));
        checkJson(json.choices[0].text, SCHEMAS.array_bounds, 'after a 400');
        // and a concurrent client was never affected
        const ok = await oa.chat.completions.create({ messages, max_tokens: 60, response_format: rf('consts') });
        checkJson(ok.choices[0].message.content, SCHEMAS.consts, 'other client');
    });
});
