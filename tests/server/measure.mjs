// measure.mjs — the issue's server targets, measured on loopback and printed (never asserted):
//
//   node measure.mjs soak  [--model M] [--clients 64] [--seconds 60]
//       64 clients for 60 s (streaming chat, completions, clients that go away mid-stream, a few
//       bad requests): answers by status class, 5xx other than 503, RSS every 5 s after warm-up.
//   node measure.mjs batch [--model M] [--parallel 8] [--tokens 48] [--threads 1]
//       aggregate decode tokens/s of 8 concurrent streams vs 1 stream (--backend cpu).
//   node measure.mjs ttft  [--model M] [--runs 15] [--threads 1]
//       time to first token through the server vs `engine run`'s prefill, medians.
//
// Needs HX_ENGINE and HX_DATA (as the tests do) and the openai package (test-server-openai.sh
// installs it). tests/server/measure.sh runs all three with the issue's settings.
import OpenAI from 'openai';
import { spawnSync } from 'node:child_process';
import { Server, MODELS, ENGINE, median, sleep } from './lib.mjs';

const args = process.argv.slice(2);
const cmd = args[0];
const opt = (name, dflt) => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 ? args[i + 1] : dflt;
};
const now = () => performance.now();
const fmt = (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : String(x));

async function soak() {
    const model = opt('model', MODELS.qwen);
    const clients = Number(opt('clients', 64));
    const seconds = Number(opt('seconds', 60));
    const srv = await new Server(model, ['--parallel', opt('parallel', '8'), '--queue', opt('queue', '64'),
        '--threads', opt('threads', '1')]).start();
    const oa = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0, timeout: 120000 });
    const counts = new Map();
    const bump = (k) => counts.set(k, (counts.get(k) || 0) + 1);
    let fiveXX = 0;
    let neterr = 0;
    let tokens = 0;
    const t0 = now();
    const end = t0 + seconds * 1000;
    const rss = [];
    const sampler = setInterval(() => rss.push({ t: (now() - t0) / 1000, kib: srv.rssKiB() }), 5000);
    const record = (e) => {
        if (e && typeof e.status === 'number') {
            bump(e.status);
            if (e.status >= 500 && e.status !== 503) fiveXX++;
        } else if (e && (e.name === 'AbortError' || e instanceof OpenAI.APIUserAbortError)) {
            bump('aborted');
        } else {
            neterr++;
            bump(`error:${e?.message ?? e}`.slice(0, 60));
        }
    };
    const one = async (i, n) => {
        const kind = (i + n) % 10;
        if (kind < 5) { // streaming chat
            const s = await oa.chat.completions.create({ messages: [{ role: 'user', content: `Tell me about ${n}` }],
                max_tokens: 32, stream: true, stream_options: { include_usage: true } });
            for await (const c of s) if (c.usage) tokens += c.usage.completion_tokens;
            bump(200);
        } else if (kind < 8) { // completions
            const r = await oa.completions.create({ prompt: `Number ${n} is`, max_tokens: 24 });
            tokens += r.usage.completion_tokens;
            bump(200);
        } else if (kind === 8) { // a client that goes away mid-stream
            const ac = new AbortController();
            const s = await oa.completions.create({ prompt: 'Go', max_tokens: 2000, stream: true }, { signal: ac.signal });
            let k = 0;
            for await (const _ of s) if (++k === 4) { ac.abort(); break; }
            bump('disconnected');
        } else { // bad input
            const r = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST', body: '{"messages": 5}' });
            await r.text();
            bump(r.status);
            if (r.status >= 500 && r.status !== 503) fiveXX++;
        }
    };
    await Promise.all(Array.from({ length: clients }, async (_, i) => {
        for (let n = 0; now() < end; n++) {
            try { await one(i, n); } catch (e) { record(e); }
        }
    }));
    clearInterval(sampler);
    const m = await srv.metrics();
    const exit = await srv.stop('SIGTERM');
    const warm = rss.filter((x) => x.t >= 10);
    const lo = Math.min(...warm.map((x) => x.kib));
    const hi = Math.max(...warm.map((x) => x.kib));
    console.log(`soak: ${clients} clients, ${seconds} s, ${model.split('/').pop()}`);
    console.log(`  answers: ${[...counts].map(([k, v]) => `${k}=${v}`).join(' ')}`);
    console.log(`  5xx other than 503: ${fiveXX}; network errors: ${neterr}; tokens received: ${tokens}`);
    console.log(`  server: completion tokens ${m.get('hx_completion_tokens_total')}, cancelled ${m.get('hx_generations_cancelled_total')}, exit ${JSON.stringify(exit)}`);
    console.log(`  RSS KiB (every 5 s): ${rss.map((x) => `${fmt(x.t, 0)}s=${x.kib}`).join(' ')}`);
    console.log(`  RSS after 10 s warm-up: min ${lo} max ${hi} spread ${fmt((100 * (hi - lo)) / lo, 1)}%`);
}

// Per-token arrival times of one stream.
async function timedStream(oa, prompt, n) {
    const times = [];
    const s = await oa.completions.create({ prompt, max_tokens: n, temperature: 0, stream: true, stream_options: { include_usage: true } });
    let hx = null;
    for await (const c of s) {
        if (c.choices[0]?.text) times.push(now());
        if (c.hx) hx = c.hx;
    }
    return { times, hx };
}

// Tokens per second in the window where every stream is decoding: from the last first-token
// to the first last-token (prefill of the others is outside it).
function windowRate(streams) {
    const t0 = Math.max(...streams.map((s) => s.times[0]));
    const t1 = Math.min(...streams.map((s) => s.times.at(-1)));
    let n = 0;
    for (const s of streams) n += s.times.filter((t) => t > t0 && t <= t1).length;
    return { rate: (n * 1000) / (t1 - t0), n, ms: t1 - t0 };
}

async function batch() {
    const model = opt('model', MODELS.qwen);
    const par = Number(opt('parallel', 8));
    const n = Number(opt('tokens', 48));
    const srv = await new Server(model, ['--backend', 'cpu', '--parallel', String(par), '--threads', opt('threads', '1')]).start(600000);
    const oa = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0, timeout: 600000 });
    await timedStream(oa, 'Warm up', 4);
    const prompts = Array.from({ length: par }, (_, i) => `Story number ${i + 1}: once upon a time`);
    const one = windowRate([await timedStream(oa, prompts[0], n)]);
    const many = await Promise.all(prompts.map((p) => timedStream(oa, p, n)));
    const agg = windowRate(many);
    await srv.stop();
    console.log(`batch: ${model.split('/').pop()}, --backend cpu --parallel ${par}, ${n} tokens per stream`);
    console.log(`  1 stream : ${fmt(one.rate)} tokens/s (${one.n} tokens in ${fmt(one.ms, 0)} ms)`);
    console.log(`  ${par} streams: ${fmt(agg.rate)} tokens/s aggregate (${agg.n} tokens in ${fmt(agg.ms, 0)} ms); per stream (server) ${many.map((s) => fmt(s.hx?.generation_tokens_per_s ?? NaN)).join(' ')}`);
    console.log(`  ratio ${par}:1 = ${fmt(agg.rate / one.rate, 2)}x`);
}

async function ttft() {
    const model = opt('model', MODELS.qwen);
    const runs = Number(opt('runs', 15));
    const threads = opt('threads', '1');
    const prompt = opt('prompt', 'Once upon a time, in a small village by the sea, there lived an old fisherman who');
    // engine run prints "prompt: N tokens in X s" on stderr: its prefill, i.e. its time to the
    // first token once the model is loaded (sampling one token is negligible beside it).
    const eng = [];
    for (let i = 0; i < runs; i++) {
        const r = spawnSync(ENGINE, ['run', '-m', model, '-p', prompt, '-n', '1', '--temp', '0', '-t', threads, '--backend', 'cpu'],
            { encoding: 'utf8' });
        const m = /prompt: (\d+) tokens in ([\d.]+) s/.exec(r.stderr);
        if (!m) throw new Error(`engine run: ${r.stderr}`);
        eng.push(Number(m[2]) * 1000);
    }
    const srv = await new Server(model, ['--backend', 'cpu', '--parallel', '1', '--threads', threads]).start(600000);
    const oa = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'x', maxRetries: 0, timeout: 600000 });
    await oa.completions.create({ prompt, max_tokens: 1 });
    const http = [];
    for (let i = 0; i < runs; i++) {
        const t = now();
        const s = await oa.completions.create({ prompt, max_tokens: 1, temperature: 0, stream: true });
        let first = 0;
        for await (const _ of s) if (!first) first = now() - t;
        http.push(first);
        await sleep(20);
    }
    const m = await srv.metrics();
    await srv.stop();
    const inner = (1000 * m.get('hx_time_to_first_token_seconds_sum')) / m.get('hx_time_to_first_token_seconds_count');
    const me = median(eng);
    const mh = median(http);
    console.log(`ttft: ${model.split('/').pop()}, ${runs} runs, --threads ${threads}`);
    console.log(`  engine run prefill (its TTFT): median ${fmt(me, 2)} ms`);
    console.log(`  server, client-side TTFT     : median ${fmt(mh, 2)} ms (server-side mean ${fmt(inner, 2)} ms)`);
    console.log(`  overhead server - engine run : ${fmt(mh - me, 2)} ms at the median`);
}

const cmds = { soak, batch, ttft };
if (!cmds[cmd]) {
    console.error('usage: node measure.mjs soak|batch|ttft [options] (see the top of this file)');
    process.exit(2);
}
await cmds[cmd]();
