// tools.test.mjs — tool calls in `engine serve` through the official OpenAI client, on the
// random-weight qwen3-micro model (docs/server.md "Tool calls"): a named function and
// "required" give valid tool_calls, constrained by the parameters' schema alone, plain and
// streamed (the streamed deltas reassemble to the plain answer at temperature 0, also through
// the client's own stream helper); the Llama 3 format (--chat-template llama3) the same way;
// tools reach the prompt (and "none" keeps them out); a tool result continues the
// conversation; bad tools, tool_choice and tool messages get 400 with `param`, and the next
// request on the same client works. Arguments are validated with ajv and by hand. Run by
// tests/test-server-openai.sh.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv2020 from 'ajv/dist/2020.js';
import { Server, MODELS } from './lib.mjs';

const ajv = new Ajv2020({ strict: false, allErrors: true });

const client = (srv) => new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'none', maxRetries: 0 });

const weather = {
    type: 'function',
    function: {
        name: 'get_weather',
        description: 'Get the current weather in a city',
        parameters: {
            type: 'object',
            properties: {
                city: { type: 'string', minLength: 1, maxLength: 12 },
                unit: { enum: ['celsius', 'fahrenheit'] },
                days: { type: 'integer' },
            },
            required: ['city', 'unit'],
            additionalProperties: false,
        },
    },
};
const add = {
    type: 'function',
    function: {
        name: 'add',
        parameters: {
            type: 'object',
            properties: { a: { type: 'number' }, b: { type: 'number' }, tags: { type: 'array', items: { type: 'boolean' }, maxItems: 3 } },
            required: ['a', 'b'],
        },
    },
};
const noargs = { type: 'function', function: { name: 'now' } };

// The arguments of a call, validated with ajv against the function's schema, and by hand.
function checkArgs(name, text) {
    const a = JSON.parse(text); // throws: not JSON
    const fn = [weather, add, noargs].find((t) => t.function.name === name);
    if (fn) {
        const validate = ajv.compile(fn.function.parameters ?? { type: 'object', properties: {}, additionalProperties: false });
        assert.ok(validate(a), `${name}(${text}): ${ajv.errorsText(validate.errors)}`);
    }
    assert.equal(typeof a, 'object');
    assert.ok(a !== null && !Array.isArray(a), `arguments are an object: ${text}`);
    const len = (s) => [...s].length; // JSON Schema counts code points
    if (name === 'get_weather') {
        assert.deepEqual(Object.keys(a).filter((k) => !['city', 'unit', 'days'].includes(k)), [], text);
        assert.equal(typeof a.city, 'string', text);
        assert.ok(len(a.city) >= 1 && len(a.city) <= 12, `city length: ${text}`);
        assert.ok(['celsius', 'fahrenheit'].includes(a.unit), text);
        if ('days' in a) assert.ok(Number.isInteger(a.days), text);
    } else if (name === 'add') {
        assert.equal(typeof a.a, 'number', text);
        assert.equal(typeof a.b, 'number', text);
        if ('tags' in a) {
            assert.ok(Array.isArray(a.tags) && a.tags.length <= 3, text);
            for (const t of a.tags) assert.equal(typeof t, 'boolean', text);
        }
    } else if (name === 'now') {
        assert.deepEqual(a, {}, text);
    } else {
        assert.fail(`unknown function ${name}`);
    }
    return a;
}

function checkCall(c, names) {
    assert.match(c.id, /^call_[0-9a-f]{24}$/);
    assert.equal(c.type, 'function');
    assert.ok(names.includes(c.function.name), `called ${c.function.name}`);
    assert.equal(typeof c.function.arguments, 'string');
    checkArgs(c.function.name, c.function.arguments);
}

// A stream's chunks reassembled by hand: content, tool calls by index, finish_reason.
async function reassemble(stream) {
    let content = '';
    let finish = null;
    const calls = [];
    const heads = [];
    let argDeltas = 0;
    for await (const ch of stream) {
        const c = ch.choices[0];
        if (!c) continue;
        if (c.finish_reason) finish = c.finish_reason;
        const d = c.delta ?? {};
        if (d.content) content += d.content;
        for (const t of d.tool_calls ?? []) {
            if (t.id) {
                assert.equal(t.index, calls.length, 'calls arrive in index order');
                assert.equal(t.function.arguments, '', 'the head carries no arguments yet');
                heads.push(t);
                calls.push({ id: t.id, type: t.type, function: { name: t.function.name, arguments: '' } });
            } else {
                calls[t.index].function.arguments += t.function.arguments;
                argDeltas++;
            }
        }
    }
    return { content, calls, finish, heads, argDeltas };
}

const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];

for (const tmpl of ['qwen3', 'llama3']) {
    describe(`tool calls, ${tmpl} format (qwen3-micro, random weights)`, () => {
        const srv = new Server(MODELS.qwen, tmpl === 'qwen3' ? [] : ['--chat-template', 'llama3']);
        let oa;
        before(async () => {
            await srv.start();
            oa = client(srv);
        });
        after(async () => assert.deepEqual(await srv.stop(), { code: 0, signal: null }));

        const named = { type: 'function', function: { name: 'get_weather' } };
        let plain;

        it('a named function: one valid call, content null, finish_reason tool_calls', async () => {
            const r = await oa.chat.completions.create({
                messages: ask, tools: [weather, add], tool_choice: named, temperature: 0, max_tokens: 120,
            });
            const m = r.choices[0].message;
            assert.equal(r.choices[0].finish_reason, 'tool_calls');
            assert.equal(m.content, null);
            assert.equal(m.tool_calls.length, 1);
            checkCall(m.tool_calls[0], ['get_weather']);
            plain = m.tool_calls[0];
        });

        it('streamed: the deltas reassemble to the plain call; no markup as content', async () => {
            const stream = await oa.chat.completions.create({
                messages: ask, tools: [weather, add], tool_choice: named, temperature: 0, max_tokens: 120,
                stream: true,
            });
            const s = await reassemble(stream);
            assert.equal(s.finish, 'tool_calls');
            assert.equal(s.content, '');
            assert.equal(s.calls.length, 1);
            checkCall(s.calls[0], ['get_weather']);
            assert.equal(s.calls[0].function.name, plain.function.name);
            assert.equal(s.calls[0].function.arguments, plain.function.arguments);
            assert.notEqual(s.calls[0].id, plain.id, 'each call gets its own id');
            // a constrained call streams its arguments as they are generated, not in one piece
            assert.ok(s.argDeltas > 1, `arguments came in ${s.argDeltas} delta(s)`);
        });

        it('the client\'s stream helper accumulates the same call', async () => {
            const runner = oa.chat.completions.stream({
                messages: ask, tools: [weather, add], tool_choice: named, temperature: 0, max_tokens: 120,
            });
            const fin = await runner.finalChatCompletion();
            const m = fin.choices[0].message;
            assert.equal(fin.choices[0].finish_reason, 'tool_calls');
            assert.equal(m.tool_calls.length, 1);
            checkCall(m.tool_calls[0], ['get_weather']);
            assert.equal(m.tool_calls[0].function.arguments, plain.function.arguments);
        });

        it('"required" with two tools, and a function without parameters, at several seeds', async () => {
            for (let seed = 1; seed <= 4; seed++) {
                const r = await oa.chat.completions.create({
                    messages: ask, tools: [weather, add], tool_choice: 'required', temperature: 1.5, seed,
                    max_tokens: 120,
                });
                assert.equal(r.choices[0].finish_reason, 'tool_calls', `seed ${seed}`);
                assert.equal(r.choices[0].message.tool_calls.length, 1);
                checkCall(r.choices[0].message.tool_calls[0], ['get_weather', 'add']);
            }
            for (let seed = 1; seed <= 3; seed++) {
                const r = await oa.chat.completions.create({
                    messages: ask, tools: [noargs, add], tool_choice: { type: 'function', function: { name: 'now' } },
                    temperature: 1.5, seed, max_tokens: 60,
                });
                checkCall(r.choices[0].message.tool_calls[0], ['now']);
            }
        });

        it('tools reach the prompt; tool_choice "none" keeps them out', async () => {
            const base = await oa.chat.completions.create({ messages: ask, max_tokens: 1 });
            const withTools = await oa.chat.completions.create({ messages: ask, tools: [weather], max_tokens: 1 });
            const none = await oa.chat.completions.create({ messages: ask, tools: [weather], tool_choice: 'none', max_tokens: 1 });
            assert.ok(withTools.usage.prompt_tokens > base.usage.prompt_tokens + 50,
                `${withTools.usage.prompt_tokens} vs ${base.usage.prompt_tokens}`);
            assert.equal(none.usage.prompt_tokens, base.usage.prompt_tokens);
            assert.equal(none.choices[0].message.tool_calls, undefined);
        });

        it('a tool result continues the conversation', async () => {
            // the call the server made above (a fixed one if that test failed)
            const call = plain ?? { id: 'call_000000000000000000000001', type: 'function',
                function: { name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' } };
            const history = [
                ...ask,
                { role: 'assistant', content: null, tool_calls: [call] },
                { role: 'tool', tool_call_id: call.id, content: '{"temperature": 21, "unit": "celsius"}' },
            ];
            for (const tool_choice of ['auto', 'none']) {
                const r = await oa.chat.completions.create({
                    messages: history, tools: [weather, add], tool_choice, temperature: 0, max_tokens: 12,
                });
                assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason), r.choices[0].finish_reason);
                assert.equal(r.choices[0].message.role, 'assistant');
                assert.equal(typeof r.choices[0].message.content, 'string');
                assert.ok(r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0);
            }
            // and without tools at all (a follow-up turn that does not offer them again)
            const r = await oa.chat.completions.create({ messages: history, max_tokens: 4 });
            assert.equal(typeof r.choices[0].message.content, 'string');
        });

        it('bad tools, tool_choice and tool messages: 400 with param; the client goes on', async () => {
            const fn = (name, parameters) => ({ type: 'function', function: { name, parameters } });
            const bad = [
                [{ tools: [{ type: 'function', function: { name: 'has space' } }] }, 'tools'],
                [{ tools: [{ type: 'code_interpreter' }] }, 'tools'],
                [{ tools: [fn('f', { type: 'string' })] }, 'tools'],
                [{ tools: [fn('f', [1, 2])] }, 'tools'],
                [{ tools: [fn('f', { type: 'object', properties: { x: { type: 'string', pattern: '^a' } } })] }, 'tools'],
                [{ tools: [weather, weather] }, 'tools'],
                [{ tools: [weather], tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice'],
                [{ tools: [weather], tool_choice: 'always' }, 'tool_choice'],
                [{ tool_choice: 'required' }, 'tool_choice'],
                [{ messages: [...ask, { role: 'tool', tool_call_id: 'call_x', content: '1' }] }, 'messages'],
                [{ messages: [...ask, { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '[1]' } }] }] }, 'messages'],
                [{ messages: [...ask, { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":' } }] }] }, 'messages'],
            ];
            for (const [extra, param] of bad) {
                const body = { messages: ask, max_tokens: 4, ...extra };
                await assert.rejects(oa.chat.completions.create(body), (e) => {
                    assert.equal(e.status, 400, `${JSON.stringify(extra)}: ${e.message}`);
                    assert.equal(e.param, param, `${JSON.stringify(extra)}: ${e.message}`);
                    return true;
                });
                const ok = await oa.chat.completions.create({ messages: ask, max_tokens: 2 });
                assert.equal(ok.choices.length, 1);
            }
        });
    });
}
