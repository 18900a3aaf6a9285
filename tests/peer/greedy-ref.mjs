// greedy-ref.mjs — llama.cpp's greedy continuation of a few prompts, with what it takes to call a
// step a near tie, as JSON on stdout (tests/test-bitnet-peer.sh reads it; docs/bitnet.md
// "Checked against llama.cpp" explains the rule). Test tooling: llama.cpp's CPU backend through
// node-llama-cpp's prebuilt binaries.
//
//   node greedy-ref.mjs MODEL.gguf EXACT.gguf N PROMPT...
//
// MODEL is the file under test (TQ1_0/TQ2_0 matrices, which llama.cpp multiplies with its
// activations rounded to 8 bits, Q8_K); EXACT holds the same weights as F32 (engine quantize, exact
// for ternary and Q8_0 values), which llama.cpp multiplies in f32. For each prompt: llama.cpp's
// tokens of the text (`text_ids`, no BOS) and of the prompt as it feeds it (`prompt_ids`); N
// greedy steps on MODEL, each with the chosen id, the runner-up and their logit gap; then EXACT fed
// the same history (teacher forcing), giving each step's exact logits of those two tokens and the
// exact margin of the chosen token over every other (negative: exact arithmetic picks another).
// Per model: sigma, the rms over all steps of (gap on MODEL - exact gap of the same two tokens),
// llama.cpp's own rounding noise on a top-2 difference; a step is a near tie when its exact
// margin is below 4 sigma (`first_near_tie`). Also EXACT's own greedy steps (`exact_steps`),
// with near ties at gaps below 1e-3 of the top logit (`exact_first_near_tie`). KV cache F32 and
// no flash attention, so the rounding of the activations of the matrix products is the only
// difference between MODEL and EXACT.
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const [model, exact, nArg, ...prompts] = process.argv.slice(2);
const n = Number(nArg);
if (!model || !exact || !(n > 0) || prompts.length === 0) {
  console.error("usage: node greedy-ref.mjs MODEL.gguf EXACT.gguf N PROMPT...");
  process.exit(2);
}
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const ctxOpts = { contextSize: 256, threads: 1, flashAttention: false,
  experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32" };
const open = async (path) => {
  const m = await llama.loadModel({ modelPath: path, gpuLayers: 0, useMmap: false });
  const ctx = await m.createContext(ctxOpts);
  return { m, ctx, seq: ctx.getSequence() };
};
const q = await open(model), x = await open(exact);
const logitsOpt = (filter) => ({ generateNext: { logits: filter ? { filter } : true } });

// N greedy steps on a model from the prompt: each step's id, runner-up, top logit and top-2 gap.
const greedy = async (h, prompt) => {
  await h.seq.clearHistory();
  const steps = [];
  let input = prompt;
  for (let i = 0; i < n; i++) {
    const items = input.map((t, k) => (k === input.length - 1 ? [t, logitsOpt({ tokens: [], includeTop: 2 })] : t));
    const r = await h.seq.controlledEvaluate(items);
    const [[a, la], [b, lb]] = [...r[input.length - 1].next.logits.entries()];
    steps.push({ id: a, second: b, logit: la, gap: la - lb });
    input = [a];
  }
  return steps;
};

const out = [];
for (const text of prompts) {
  const textIds = q.m.tokenize(text);
  const prompt = [...(q.m.tokens.shouldPrependBosToken ? [q.m.tokens.bos] : []), ...textIds];
  const steps = await greedy(q, prompt);
  // EXACT on MODEL's history: the two tokens' exact logits and the exact top two.
  await x.seq.clearHistory();
  const hist = [...prompt, ...steps.slice(0, -1).map((s) => s.id)];
  const items = hist.map((t, k) => {
    const i = k - (prompt.length - 1);
    return i >= 0 ? [t, logitsOpt({ tokens: [steps[i].id, steps[i].second], includeTop: 2 })] : t;
  });
  const r = await x.seq.controlledEvaluate(items);
  steps.forEach((s, i) => {
    const l = r[prompt.length - 1 + i].next.logits;
    s.exact_gap = l.get(s.id) - l.get(s.second);
    let best = -Infinity;
    for (const [t, v] of l) if (t !== s.id) best = Math.max(best, v);
    s.exact_margin = l.get(s.id) - best;
  });
  // EXACT's own greedy continuation: what any f32 computation of these weights must give, up to
  // gaps of f32 rounding (near tie: a gap below 1e-3 of the top logit's magnitude).
  const exactSteps = await greedy(x, prompt);
  const ke = exactSteps.findIndex((s) => s.gap < 1e-3 * Math.max(1, Math.abs(s.logit)));
  out.push({ prompt: text, text_ids: textIds, prompt_ids: prompt, steps, exact_steps: exactSteps,
    exact_first_near_tie: ke < 0 ? n : ke });
}
const all = out.flatMap((p) => p.steps);
const sigma = Math.sqrt(all.reduce((a, s) => a + (s.gap - s.exact_gap) ** 2, 0) / all.length);
const tie = 4 * sigma;
for (const p of out) {
  const k = p.steps.findIndex((s) => s.exact_margin < tie);
  p.first_near_tie = k < 0 ? p.steps.length : k;
}
console.log(JSON.stringify({ model, peer: "llama.cpp (node-llama-cpp 3.22.1, CPU, 1 thread)", sigma,
  near_tie_below: tie, prompts: out }));
for (const h of [q, x]) { await h.ctx.dispose(); await h.m.dispose(); }
await llama.dispose();
