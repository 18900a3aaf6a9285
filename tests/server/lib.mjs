// lib.mjs — helpers for the `engine serve` tests and measurements: start a server on a free
// loopback port, wait for /health, stop it with a signal and collect its exit code; run
// `engine run`; raw HTTP over a socket for requests a well-behaved client never sends.
import { spawn, execFileSync } from 'node:child_process';
import net from 'node:net';
import fs from 'node:fs';
import path from 'node:path';

export const ENGINE = process.env.HX_ENGINE;
export const DATA = process.env.HX_DATA;
if (!ENGINE || !DATA) throw new Error('HX_ENGINE and HX_DATA must be set');

export const MODELS = {
    stories: path.join(DATA, 'stories260K/stories260K.gguf'),
    qwen: path.join(DATA, 'qwen3/qwen3-micro-q8_0.gguf'),
    tern: path.join(DATA, 'qwen3/qwen3-tern-tq2_0.gguf'),
};

const live = new Set();
process.on('exit', () => {
    for (const p of live) p.kill('SIGKILL');
});

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A running `engine serve`; .url is http://127.0.0.1:PORT, .log its stderr so far. env: extra
// environment variables (e.g. HX_FAULT to slow the engine down).
export class Server {
    constructor(model, args = [], env = {}) {
        this.model = model;
        this.args = args;
        this.env = env;
        this.log = '';
        this.exit = null;
    }

    async start(timeoutMs = 30000) {
        const argv = ['serve', '-m', this.model, '--port', '0', '--threads', '1', ...this.args];
        this.proc = spawn(ENGINE, argv, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...this.env } });
        live.add(this.proc);
        // A failed test must not leave the process waiting on its server: nothing here keeps
        // node alive, and whatever still runs when node exits is killed.
        this.proc.unref();
        this.proc.stderr.unref();
        this.exited = new Promise((resolve) => {
            this.proc.on('exit', (code, signal) => {
                live.delete(this.proc);
                this.exit = { code, signal };
                resolve(this.exit);
            });
        });
        this.proc.stderr.setEncoding('utf8');
        const port = await new Promise((resolve, reject) => {
            const t = setTimeout(() => reject(new Error(`no listening line:\n${this.log}`)), timeoutMs);
            this.proc.stderr.on('data', (d) => {
                this.log += d;
                const m = /listening on http:\/\/[^:]+:(\d+)/.exec(this.log);
                if (m) {
                    clearTimeout(t);
                    resolve(Number(m[1]));
                }
            });
            this.exited.then((e) => reject(new Error(`server exited ${JSON.stringify(e)}:\n${this.log}`)));
        });
        this.port = port;
        this.url = `http://127.0.0.1:${port}`;
        const t0 = Date.now();
        for (;;) {
            try {
                const r = await fetch(`${this.url}/health`);
                if (r.status === 200) break;
            } catch { /* not yet */ }
            if (this.exit) throw new Error(`server exited while loading:\n${this.log}`);
            if (Date.now() - t0 > timeoutMs) throw new Error(`server not healthy in time:\n${this.log}`);
            await sleep(20);
        }
        return this;
    }

    get pid() { return this.proc.pid; }

    // Wait for the exit (SIGKILL after timeoutMs); returns {code, signal}. The timer keeps
    // node running meanwhile (the child itself is unref'ed).
    async wait(timeoutMs = 20000) {
        if (this.exit) return this.exit;
        const t = setTimeout(() => this.proc.kill('SIGKILL'), timeoutMs);
        const e = await this.exited;
        clearTimeout(t);
        return e;
    }

    // Send a signal and wait for the exit; returns {code, signal}.
    async stop(sig = 'SIGTERM', timeoutMs = 20000) {
        if (this.exit) return this.exit;
        this.proc.kill(sig);
        return this.wait(timeoutMs);
    }

    // Access-log lines (hx-serve: req=...) so far, as objects {req, method, route, status,
    // prompt_tokens, cached_tokens, gen_tokens, truncated}.
    accessLog() {
        const out = [];
        for (const m of this.log.matchAll(/^hx-serve: req=(\d+) (\S+) (\S+) status=(\d+) prompt_tokens=(\d+) cached_tokens=(\d+) gen_tokens=(\d+) .*?( truncated)?$/gm))
            out.push({ req: +m[1], method: m[2], route: m[3], status: +m[4], prompt_tokens: +m[5], cached_tokens: +m[6], gen_tokens: +m[7], truncated: !!m[8] });
        return out;
    }

    async metrics() {
        const text = await (await fetch(`${this.url}/metrics`)).text();
        return parseMetrics(text);
    }

    rssKiB() {
        const s = fs.readFileSync(`/proc/${this.pid}/status`, 'utf8');
        return Number(/VmRSS:\s+(\d+)/.exec(s)[1]);
    }
}

// Prometheus text → Map of "name{labels}" → number.
export function parseMetrics(text) {
    const m = new Map();
    for (const line of text.split('\n')) {
        if (!line || line.startsWith('#')) continue;
        const i = line.lastIndexOf(' ');
        m.set(line.slice(0, i), Number(line.slice(i + 1)));
    }
    return m;
}

// `engine run` greedy: {text, ids} (text as printed, without the final newline).
export function engineRun(model, prompt, n, extra = []) {
    const argv = ['run', '-m', model, '-p', prompt, '-n', String(n), '--temp', '0', '-t', '1', ...extra];
    const run = (more) => execFileSync(ENGINE, [...argv, ...more], { stdio: ['ignore', 'pipe', 'pipe'] });
    const text = run([]).toString('utf8').replace(/\n$/, '');
    const idl = run(['--ids']).toString('utf8').trim();
    return { text, ids: idl ? idl.split(/\s+/).map(Number) : [] };
}

// Raw HTTP/1.1 exchange: write `data` (string or Buffer, or an array of pieces sent `gapMs`
// apart), read until the server closes or `timeoutMs`. Returns {status, headers, body, raw}.
export function rawHttp(port, data, { timeoutMs = 5000, gapMs = 0, endAfter = false } = {}) {
    return new Promise((resolve) => {
        const sock = net.connect(port, '127.0.0.1');
        const chunks = [];
        let done = false;
        const finish = () => {
            if (done) return;
            done = true;
            clearTimeout(t);
            sock.destroy();
            resolve(parseRaw(Buffer.concat(chunks)));
        };
        const t = setTimeout(finish, timeoutMs);
        sock.on('data', (d) => chunks.push(d));
        sock.on('end', finish);
        sock.on('close', finish);
        sock.on('error', finish);
        sock.on('connect', async () => {
            const pieces = Array.isArray(data) ? data : [data];
            for (const p of pieces) {
                if (done) return;
                sock.write(p);
                if (gapMs) await sleep(gapMs);
            }
            if (endAfter) sock.end();
        });
    });
}

export function parseRaw(buf) {
    const raw = buf.toString('latin1');
    const i = raw.indexOf('\r\n\r\n');
    if (i < 0) return { status: 0, headers: {}, body: '', raw };
    const lines = raw.slice(0, i).split('\r\n');
    const status = Number((/^HTTP\/1\.1 (\d{3})/.exec(lines[0]) || [0, 0])[1]);
    const headers = {};
    for (const l of lines.slice(1)) {
        const k = l.indexOf(':');
        headers[l.slice(0, k).trim().toLowerCase()] = l.slice(k + 1).trim();
    }
    return { status, headers, body: Buffer.from(raw.slice(i + 4), 'latin1').toString('utf8'), raw };
}

export function post(pathname, body, headers = {}) {
    const b = Buffer.isBuffer(body) ? body : Buffer.from(body);
    let h = `POST ${pathname} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n`;
    for (const [k, v] of Object.entries(headers)) h += `${k}: ${v}\r\n`;
    h += `Content-Length: ${b.length}\r\nConnection: close\r\n\r\n`;
    return Buffer.concat([Buffer.from(h, 'latin1'), b]);
}

export function median(xs) {
    const s = [...xs].sort((a, b) => a - b);
    const n = s.length;
    return n ? (n % 2 ? s[(n - 1) >> 1] : (s[n / 2 - 1] + s[n / 2]) / 2) : NaN;
}
