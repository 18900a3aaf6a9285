// peer-llama.mjs — the peer measurement: llama.cpp's CPU backend (through the prebuilt
// binaries of the npm package node-llama-cpp) on the same GGUF files, the same prompt length
// and generation length as `engine bench`, so ratios come from one run on one machine.
//
//   node bench/peer-llama.mjs MODEL.gguf [-p 128] [-n 64] [-r 3] [-t 2] [-o md|json]
//
// Prompt: a fixed English text's tokens, repeated to length; generation: greedy. Weights are loaded without mmap
// (resident before timing), one warm-up run first. Prints tokens/s per repetition and the
// median and best, like engine bench. Installed by bench/peer-llama.sh into bench/peer/.
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const args = process.argv.slice(2);
const opt = { p: 128, n: 64, r: 3, t: 2, o: "md" };
let model = null;
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (["-p", "-n", "-r", "-t"].includes(a)) opt[a.slice(1)] = Number(args[++i]);
  else if (a === "-o") opt.o = args[++i];
  else if (!model) model = a;
  else { console.error(`peer-llama: unexpected argument ${a}`); process.exit(2); }
}
if (!model || !(opt.p > 0) || !(opt.n > 0) || !(opt.r > 0) || !(opt.t > 0)) {
  console.error("usage: node bench/peer-llama.mjs MODEL.gguf [-p N] [-n N] [-r N] [-t N] [-o md|json]");
  process.exit(2);
}

const median = (v) => { const s = [...v].sort((a, b) => a - b); const h = s.length >> 1; return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2; };

const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const m = await llama.loadModel({ modelPath: model, useMmap: false, gpuLayers: 0 });
const ctx = await m.createContext({ contextSize: opt.p + opt.n + 16, batchSize: Math.max(opt.p, 32), threads: { ideal: opt.t, min: opt.t } });
const seq = ctx.getSequence();
const text = "Once upon a time, in a small village by the sea, there lived an old fisherman who " +
  "told stories to the children every evening about storms, stars, ships and distant lands. ";
const base = m.tokenize(text.repeat(8));
const prompt = Array.from({ length: opt.p }, (_, i) => base[i % base.length]);

const pp = [], tg = [];
for (let rep = -1; rep < opt.r; rep++) {
  await seq.clearHistory();
  let t0 = performance.now();
  await seq.evaluateWithoutGeneratingNewTokens(prompt);
  const tp = (performance.now() - t0) / 1000;
  await seq.clearHistory();
  await seq.evaluateWithoutGeneratingNewTokens(prompt.slice(0, 1));
  let got = 0;
  t0 = performance.now();
  for await (const tok of seq.evaluate([prompt[1]], { temperature: 0 })) {
    void tok;
    if (++got >= opt.n) break;
  }
  const tt = (performance.now() - t0) / 1000;
  if (rep >= 0) { pp.push(opt.p / tp); tg.push(got / tt); }
}
const res = {
  model, threads: opt.t, peer: "llama.cpp (node-llama-cpp 3.22.1, CPU)",
  pp: { n: opt.p, median_ts: median(pp), best_ts: Math.max(...pp), samples: pp },
  tg: { n: opt.n, median_ts: median(tg), best_ts: Math.max(...tg), samples: tg },
};
if (opt.o === "json") console.log(JSON.stringify(res));
else {
  console.log(`| model | peer | threads | test | t/s median | t/s best |`);
  console.log(`|---|---|---|---|---|---|`);
  console.log(`| ${model.split("/").pop()} | llama.cpp | ${opt.t} | pp${opt.p} | ${res.pp.median_ts.toFixed(2)} | ${res.pp.best_ts.toFixed(2)} |`);
  console.log(`| ${model.split("/").pop()} | llama.cpp | ${opt.t} | tg${opt.n} | ${res.tg.median_ts.toFixed(2)} | ${res.tg.best_ts.toFixed(2)} |`);
}
await ctx.dispose();
await m.dispose();
await llama.dispose();
