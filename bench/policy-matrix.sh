#!/usr/bin/env bash
# bench/policy-matrix.sh — every dispatch policy this machine can run, on a Qwen3-0.6B-shaped and
# a Qwen3-8B-shaped model (`engine mkmodel`, random weights), with and without a memory cap that
# holds half of the 8B model on the GPU, timed by `engine bench` and written as one table
# (matrix.md), its rows (matrix.json) and one plot (matrix.svg: decode tokens/s per policy).
# The same script runs here (cpu, Vulkan on lavapipe, npu-sim) and, unchanged, on a GPU machine
# (hip or Vulkan on the GPU, the CPU's 16 cores): the devices are whatever `engine devices` says
# is available. docs/policies.md "The policy matrix" says how to read it.
#
# usage: bench/policy-matrix.sh [--out DIR] [--engine PATH] [--models DIR] [--type T]
#                               [--only 0.6b|8b] [--cap SIZE] [--quick] [--budget S]
#   --out DIR      results (default build/policy-matrix)
#   --engine PATH  the engine (default build/engine, then build-gpu/engine)
#   --models DIR   where the models are made once and kept (default OUT/models)
#   --type T       weight type of both models (default Q8_0)
#   --only M       one of the two models
#   --cap SIZE     the GPU's cap for the capped rows (default: half the model file's bytes,
#                  so neither model fits the GPU whole)
#   --quick        pp16/tg4, two repetitions (default pp64/tg16, three; for a machine where
#                  the 8B model crawls: this one)
#   --budget S     stop starting rows after S seconds (default 570, for a GPU machine's 10
#                  minutes; on this 2-core machine the whole matrix takes hours); rows not
#                  run say so
# Each row is one `engine bench` run with a time limit; a plan refused for memory, a policy the
# build lacks or a failure is a row that says why. Exit status 0 when the table was written,
# 1 when a row failed for a reason other than those, 2 for a usage error.
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT="" E="" MODELS="" TYPE=Q8_0 ONLY="" CAP="" QUICK=0 BUDGET=570
while [ $# -gt 0 ]; do
    case $1 in
    --out) OUT=${2:?}; shift ;;
    --engine) E=${2:?}; shift ;;
    --models) MODELS=${2:?}; shift ;;
    --type) TYPE=${2:?}; shift ;;
    --only) ONLY=${2:?}; shift ;;
    --cap) CAP=${2:?}; shift ;;
    --quick) QUICK=1 ;;
    --budget) BUDGET=${2:?}; shift ;;
    -h | --help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "policy-matrix: unknown option '$1' (--help)" >&2; exit 2 ;;
    esac
    shift
done
case $ONLY in "" | 0.6b | 8b) ;; *) echo "policy-matrix: --only 0.6b|8b, not '$ONLY'" >&2; exit 2 ;; esac
[[ $BUDGET =~ ^[0-9]+$ ]] || { echo "policy-matrix: --budget wants seconds, not '$BUDGET'" >&2; exit 2; }
if [ -z "$E" ]; then
    for e in "$ROOT/build/engine" "$ROOT/build-gpu/engine"; do [ -x "$e" ] && E=$e && break; done
fi
[ -x "${E:-}" ] || { echo "policy-matrix: no engine (build first, or --engine PATH)" >&2; exit 2; }
OUT=${OUT:-$ROOT/build/policy-matrix}
MODELS=${MODELS:-$OUT/models}
VOCAB=${HX_DATA:-$ROOT/../shared/data}/vocab/ggml-vocab-qwen2.gguf
mkdir -p "$OUT/rows" "$MODELS" || exit 2
rm -f "$OUT"/rows/*
T0=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - T0))); }

# ---- devices: the GPU (hip before vulkan) and the NPU (the real one before the simulator) ----
devs=$("$E" devices 2> /dev/null)
has() { grep -q "^  $1 *available" <<< "$devs"; }
G="" N=""
for d in hip vulkan; do has $d && { G=$d; break; }; done
for d in npu npu-sim; do has $d && { N=$d; break; }; done
echo "policy-matrix: engine $E; devices: cpu${G:+, gpu $G}${N:+, npu $N}; $(nproc) cores"

# ---- models, made once ----
model() { # NAME SHAPE -> path on stdout
    local m=$MODELS/$1-$TYPE.gguf
    if [ ! -s "$m" ]; then
        [ -f "$VOCAB" ] || { echo "policy-matrix: no vocabulary at $VOCAB (set HX_DATA)" >&2; return 1; }
        echo "policy-matrix: making $m (engine mkmodel --shape $2 --type $TYPE)" >&2
        "$E" mkmodel --shape "$2" --type "$TYPE" --vocab "$VOCAB" -o "$m.tmp" >&2 &&
            mv "$m.tmp" "$m" || { rm -f "$m.tmp"; return 1; }
    fi
    echo "$m"
}
M06="" M8=""
[ "$ONLY" != 8b ] && { M06=$(model qwen3-0.6b qwen3-0.6b) || exit 1; }
[ "$ONLY" != 0.6b ] && { M8=$(model qwen3-8b qwen3-8b) || exit 1; }

# ---- policies: label and policy, every one whose devices are here ----
pol=("cpu_only single:cpu")
if [ -n "$G" ]; then
    pol+=("gpu_only single:$G" "gemm-offload:$G gemm-offload:$G"
        "layer-split:$G=0.75,cpu=0.25 layer-split:$G=0.75,cpu=0.25"
        "layer-split:$G=0.5,cpu=0.5 layer-split:$G=0.5,cpu=0.5"
        "layer-split:$G=0.25,cpu=0.75 layer-split:$G=0.25,cpu=0.75"
        "layer_by_layer layer-split:alternate:$G,cpu"
        "phase-split:$G,cpu phase-split:$G,cpu"
        "tensor-split:$G=0.5,cpu=0.5 tensor-split:$G=0.5,cpu=0.5"
        "fit:$G,cpu fit:$G,cpu")
fi
pol+=("auto auto:${G:+$G,}${N:+$N,}cpu")
if [ -n "$N" ]; then
    B=${G:-cpu}
    pol+=("npu_only single:$N" "gemm-offload:$N gemm-offload:$N"
        "attention_on_npu op-map:qkv=$N,o=$N,default=$B"
        "ffn_on_npu op-map:gate_up=$N,down=$N,default=$B"
        "qkv_on_npu op-map:qkv=$N,default=$B")
    [ -n "$G" ] && pol+=("prefill_npu_decode_gpu phase-split:$N,$G")
fi

if [ $QUICK = 1 ]; then shape=(-p 16 -n 4 -r 2); else shape=(-p 64 -n 16 -r 3); fi

# ---- the rows ----
i=0 failed=0
for m in $M06 $M8; do
    name=$(basename "$m" .gguf)
    caps=(none)
    [ -n "$G" ] && caps+=("$G=${CAP:-$(($(stat -L -c %s "$m") / 2 / 1048576))M}")
    for cap in "${caps[@]}"; do
        for p in "${pol[@]}"; do
            label=${p%% *} policy=${p#* }
            # under the cap: the policies that put something on the GPU, and cpu_only and auto
            # to compare with
            [ "$cap" != none ] && [[ $policy != *$G* ]] && [ "$label" != cpu_only ] && continue
            # the NPU simulator on the 8B model: hours, and no device's figure
            [ "$m" = "$M8" ] && [ "$N" = npu-sim ] && [[ $policy == *npu-sim* ]] &&
                [[ $policy != auto* ]] && continue
            i=$((i + 1))
            row=$OUT/rows/$(printf %03d $i)
            printf '%s\t%s\t%s\t%s\n' "$name" "$cap" "$label" "$policy" > "$row.key"
            lim=$(left)
            if [ "$lim" -le 10 ]; then echo "not run: the ${BUDGET} s budget was spent" > "$row.why"; continue; fi
            args=(bench -m "$m" --policy "$policy" "${shape[@]}" -o json)
            [ "$cap" != none ] && args+=(--mem "$cap")
            # 8B-shaped: the ref device's check before timing would take longer than the row
            [ "$m" = "$M8" ] && args+=(--no-verify)
            printf 'policy-matrix: %-22s %-14s %-34s ' "$name" "$cap" "$label"
            s0=$(date +%s)
            timeout "$lim" "$E" "${args[@]}" > "$row.json" 2> "$row.err"
            rc=$?
            echo "exit $rc, $(($(date +%s) - s0)) s"
            if [ $rc -ne 0 ]; then
                why=$(grep -E 'error|refus|does not fit|unknown|unavailable|cannot' "$row.err" | tail -1)
                [ $rc -eq 124 ] && why="timed out after $lim s (the budget)"
                echo "${why:-exit $rc: $(tail -1 "$row.err")}" > "$row.why"
                case $why in
                *"does not fit"* | *unknown* | *unavailable* | *"not built"* | *"timed out"*) ;;
                *) failed=$((failed + 1)) ;;
                esac
            fi
        done
    done
done

# ---- the table, the rows, the plot ----
python3 - "$OUT" "$(nproc)" "${G:-none}" "${N:-none}" << 'EOF'
import glob, json, os, sys, html
out, cores, gpu, npu = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
rows = []
for key in sorted(glob.glob(f"{out}/rows/*.key")):
    b = key[:-4]
    model, cap, label, policy = open(key).read().rstrip("\n").split("\t")
    r = {"model": model, "cap": cap, "label": label, "policy": policy, "status": "ok"}
    if os.path.exists(b + ".why"):
        r["status"] = open(b + ".why").read().strip()
    else:
        try:
            got = json.load(open(b + ".json"))
        except Exception as e:
            got, r["status"] = [], f"no JSON from engine bench ({e})"
        for t in got:
            k = "pp" if t["n_prompt"] else "tg"
            r[k] = t
    rows.append(r)

def ts(r, k):
    return r[k]["median_ts"] if k in r else None

# per model and cap: the best decode, cpu_only's, the best hand-written layer-split
summary = []
for (model, cap) in sorted({(r["model"], r["cap"]) for r in rows}, key=lambda x: (x[0], x[1] != "none")):
    g = [r for r in rows if r["model"] == model and r["cap"] == cap and ts(r, "tg")]
    if not g:
        continue
    best = max(g, key=lambda r: ts(r, "tg"))
    cpu = next((r for r in g if r["label"] == "cpu_only"), None)
    ls = [r for r in g if r["policy"].startswith("layer-split:") and "alternate" not in r["policy"]]
    bls = max(ls, key=lambda r: ts(r, "tg")) if ls else None
    line = f"{model}, cap {cap}: best decode {best['label']} {ts(best, 'tg'):.2f} t/s"
    for lab in ("fit", "auto"):
        x = next((r for r in g if r["label"].startswith(lab)), None)
        if x:
            line += f"; {x['label']} ({x['tg']['devices']}) {ts(x, 'tg'):.2f} t/s = {ts(x, 'tg') / ts(best, 'tg'):.2f}x the best"
            if cpu: line += f", {ts(x, 'tg') / ts(cpu, 'tg'):.2f}x cpu_only"
            if bls and lab == "fit": line += f", {ts(x, 'tg') / ts(bls, 'tg'):.2f}x the best layer-split ({bls['label']})"
    # on a shared machine the same plan's figure moves with the other load; say which rows
    # auto's plan equals (same devices, one split per token) so plan choice can be judged
    a = next((r for r in g if r["label"] == "auto"), None)
    if a and a["tg"].get("splits_per_token") == 1:
        same = [r["label"] for r in g if r is not a and r["tg"].get("devices") == a["tg"]["devices"]
                and r["tg"].get("splits_per_token") == 1 and "," not in r["tg"]["devices"]]
        if same: line += f"; auto's decode plan is {' = '.join(same)}'s (single {a['tg']['devices']})"
    summary.append(line)

def f(v, fmt="{:.2f}"):
    return fmt.format(v) if v is not None else "—"

md = [f"# Policy matrix", "",
      f"Devices: cpu ({cores} cores), gpu {gpu}, npu {npu}. Models: `engine mkmodel` shapes, random weights. "
      "Tokens/s are medians of `engine bench`'s timed runs; `cap` is `--mem` for that row. "
      "`other load`: cores busy with other work while the row ran (bench's /proc/stat sample); "
      "`BW share` is against a read-bandwidth probe run beside it, so it moves less with that load.", ""]
md += ["| model | cap | policy | devices | pp t/s | tg t/s | tg vs cpu_only | GiB/token | BW share | other load | splits/token | moved/token | status |",
       "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
cpu_tg = {(r["model"], r["cap"]): ts(r, "tg") for r in rows if r["label"] == "cpu_only"}
for r in rows:
    t, p = r.get("tg"), r.get("pp")
    c = cpu_tg.get((r["model"], r["cap"]))
    ratio = ts(r, "tg") / c if c and ts(r, "tg") else None
    md.append("| " + " | ".join([r["model"], r["cap"], f"`{r['label']}`" + ("" if r["label"] == r["policy"] else f" (`{r['policy']}`)"),
        (t or p or {}).get("devices", "—"), f(ts(r, "pp")), f(ts(r, "tg")), f(ratio, "{:.2f}x"),
        f(t["weight_bytes_per_token"] / 2**30 if t else None, "{:.3f}"),
        f(t["bw_share"] * 100 if t and t.get("bw_share") is not None else None, "{:.0f}%"),
        f(t.get("other_load_cores") if t else None, "{:.1f} cores"),
        f(t["splits_per_token"] if t else None, "{:.1f}"),
        f(t["bytes_moved_per_token"] / 1024 if t else None, "{:.1f} KiB"),
        r["status"].replace("|", "/")]) + " |")
md += ["", "## Summary", ""] + [f"- {s}" for s in summary]
open(f"{out}/matrix.md", "w").write("\n".join(md) + "\n")
json.dump({"devices": {"cpu_cores": int(cores), "gpu": gpu, "npu": npu}, "rows": rows, "summary": summary},
          open(f"{out}/matrix.json", "w"), indent=1)

# the plot: one group of bars per model and cap, one bar per policy (decode tokens/s, log scale)
import math
groups = []
for r in rows:
    k = (r["model"], r["cap"])
    if not groups or groups[-1][0] != k: groups.append((k, []))
    groups[-1][1].append(r)
vals = [ts(r, "tg") for r in rows if ts(r, "tg")]
lo = math.floor(math.log10(min(vals))) if vals else 0
hi = math.ceil(math.log10(max(vals))) if vals else 1
hi = max(hi, lo + 1)
bw, gap, H, top, left = 14, 30, 300, 40, 60
W = max(720, left + sum(len(g[1]) * bw + gap for g in groups) + 20)
s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{top + H + 260}" font-family="sans-serif" font-size="11">',
     f'<text x="{left}" y="20" font-size="14">decode tokens/s per policy (log scale); devices: cpu, gpu {html.escape(gpu)}, npu {html.escape(npu)}</text>']
y = lambda v: top + H - (math.log10(v) - lo) / (hi - lo) * H
for e in range(lo, hi + 1):
    s.append(f'<line x1="{left}" x2="{W - 10}" y1="{y(10**e):.1f}" y2="{y(10**e):.1f}" stroke="#ddd"/>'
             f'<text x="{left - 6}" y="{y(10**e) + 4:.1f}" text-anchor="end">{10**e:g}</text>')
x = left + 10
for gi, ((model, cap), g) in enumerate(groups):
    # group labels alternate between two lines: a narrow group's label is wider than its bars
    s.append(f'<text x="{x}" y="{top + H + 236 + 14 * (gi % 2)}">{html.escape(model)}, cap {html.escape(cap)}</text>')
    for r in g:
        v = ts(r, "tg")
        if v:
            s.append(f'<rect x="{x}" y="{y(v):.1f}" width="{bw - 2}" height="{top + H - y(v):.1f}" fill="#4a7ebb">'
                     f'<title>{html.escape(r["label"])}: {v:.2f} t/s</title></rect>')
        s.append(f'<text transform="translate({x + 9},{top + H + 6}) rotate(60)">{html.escape(r["label"][:34])}{"" if v else " (—)"}</text>')
        x += bw
    x += gap
s.append("</svg>")
open(f"{out}/matrix.svg", "w").write("\n".join(s) + "\n")
print("\n".join(summary))
EOF
[ $? -eq 0 ] || { echo "policy-matrix: the table could not be written" >&2; exit 1; }
echo "policy-matrix: $OUT/matrix.md, matrix.json, matrix.svg ($(($(date +%s) - T0)) s)"
[ $failed -eq 0 ]
