#!/usr/bin/env bash
# busy-neighbour.sh — generation speed beside a busy neighbour: `engine bench` on Qwen3-0.6B-shaped
# models (made with `engine mkmodel` if missing) with the machine as it is ("idle") and with one
# other process spinning on one core ("loaded"), at 1 and 2 threads; the same for an older engine
# binary (--base) and for llama.cpp (bench/peer-llama.sh) where given / installable. Every
# combination runs once per round and the rounds alternate the order, so drifting load from other
# users falls on all of them; the table gives medians over all rounds' samples, in tokens/s.
#
#   bash bench/busy-neighbour.sh [-r ROUNDS] [-n N_GEN] [-p N_PROMPT] [-t "1 2"] [--reps R]
#        [--base ENGINE] [--no-peer] [--pin CPU] [--spinners K] [--conds "idle loaded"] [--verify]
#        [-d MODEL_DIR] [TYPE...]
#
#   TYPE         model types (default: TQ2_0 Q8_0)
#   -r ROUNDS    rounds (default 3)
#   -n N_GEN     generation length, tgN (default 32)
#   -p N_PROMPT  also a prefill test ppN, idle and loaded (default 0: none)
#   --reps R     engine bench repetitions per run (default 3); llama.cpp runs max(R-1, 1)
#   --base E     an older engine binary, measured the same way in every round (A/B in one run)
#   --no-peer    leave llama.cpp out
#   --pin CPU    pin the spinner to that CPU (default: not pinned, the OS places it)
#   --spinners K neighbour processes (default 1)
#   --conds L    which of idle and loaded to run (default both)
#   --verify     let engine bench check each context against ref (slower; off by default)
#
# The neighbour is `sh -c 'while :; do :; done'` in a session of its own (as a browser would be:
# another scheduler autogroup), started just before a loaded run and killed just after; each has
# a time limit (timeout) so that none outlives the script. Raw JSON stays in a temp folder.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
E=${HX_ENGINE:-$here/../build/engine}
VOCAB=${HX_VOCAB:-$here/../../shared/data/vocab/ggml-vocab-qwen2.gguf}
rounds=3 ngen=32 nprompt=0 threads="1 2" reps=3 base="" peer=1 pin="" spinners=1 verify=0
conds_all="idle loaded"
dir=${TMPDIR:-/tmp}/hx-peer-models
while [ $# -gt 0 ]; do
  case $1 in
    -r) rounds=$2; shift 2 ;;
    -n) ngen=$2; shift 2 ;;
    -p) nprompt=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --base) base=$2; shift 2 ;;
    --no-peer) peer=0; shift ;;
    --pin) pin=$2; shift 2 ;;
    --spinners) spinners=$2; shift 2 ;;
    --conds) conds_all=$2; shift 2 ;;
    --verify) verify=1; shift ;;
    -d) dir=$2; shift 2 ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    -*) echo "busy-neighbour: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
types=${*:-TQ2_0 Q8_0}
for v in "$rounds" "$ngen" "$nprompt" "$reps" "$spinners"; do
  case $v in ''|*[!0-9]*) echo "busy-neighbour: not a count: $v" >&2; exit 2 ;; esac
done
[ "$rounds" -ge 1 ] && [ "$ngen" -ge 1 ] && [ "$reps" -ge 1 ] && [ "$spinners" -ge 1 ] ||
  { echo "busy-neighbour: -r, -n, --reps and --spinners must be at least 1" >&2; exit 2; }
for c in $conds_all; do
  case $c in idle|loaded) ;; *) echo "busy-neighbour: --conds takes idle and/or loaded" >&2; exit 2 ;; esac
done
[ -x "$E" ] || { echo "busy-neighbour: no engine at $E (build first, or set HX_ENGINE)" >&2; exit 2; }
[ -z "$base" ] || [ -x "$base" ] || { echo "busy-neighbour: --base $base is not executable" >&2; exit 2; }
[ -z "$pin" ] || command -v taskset >/dev/null ||
  { echo "busy-neighbour: --pin needs taskset (util-linux)" >&2; exit 2; }

out=$(mktemp -d)
spin_pids=""
stop_spinners() {
  for p in $spin_pids; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done
  for p in $spin_pids; do wait "$p" 2>/dev/null || true; done
  spin_pids=""
}
trap stop_spinners EXIT
trap 'stop_spinners; exit 130' INT TERM
start_spinners() {
  for _ in $(seq "$spinners"); do
    if [ -n "$pin" ]; then
      setsid taskset -c "$pin" timeout 900 sh -c 'while :; do :; done' &
    else
      setsid timeout 900 sh -c 'while :; do :; done' &
    fi
    spin_pids="$spin_pids $!"
  done
  sleep 0.3 # let the scheduler place them
}

# llama.cpp through node-llama-cpp: installed on first use by peer-llama.sh; if that fails, hx only
if [ "$peer" = 1 ]; then
  if ! command -v node >/dev/null; then
    echo "busy-neighbour: node is not installed: reporting hx alone" >&2; peer=0
  elif ! bash "$here/peer-llama.sh" >/dev/null 2>"$out/peer-install.log" &&
       [ ! -d "$here/peer/node_modules/node-llama-cpp" ]; then
    echo "busy-neighbour: node-llama-cpp could not be installed (see $out/peer-install.log):" \
         "reporting hx alone" >&2
    peer=0
  fi
fi

mkdir -p "$dir"
for ty in $types; do
  m=$dir/qwen3-0.6b-$ty.gguf
  [ -f "$m" ] || "$E" mkmodel --shape qwen3-0.6b --type "$ty" --vocab "$VOCAB" -o "$m" >&2
done

engines="new"
[ -n "$base" ] && engines="$engines base"
[ "$peer" = 1 ] && engines="$engines peer"
vflag=--no-verify
[ "$verify" = 1 ] && vflag=""
preps=$((reps > 1 ? reps - 1 : 1))
pp=$nprompt
[ "$pp" -gt 0 ] || pp=8 # llama.cpp's script always runs a prompt; hx runs none then

run_one() { # engine model threads cond round
  local eng=$1 ty=$2 t=$3 cond=$4 r=$5 m=$dir/qwen3-0.6b-$2.gguf
  local f=$out/$eng-$ty-t$t-$cond-$r.json
  [ "$cond" = loaded ] && start_spinners
  case $eng in
    new|base)
      local bin=$E
      [ "$eng" = base ] && bin=$base
      HX_LOG_LEVEL=debug "$bin" bench -m "$m" -t "$t" -p "$nprompt" -n "$ngen" -r "$reps" \
        --bw-gbs 1 $vflag -o json > "$f" 2> "$f.err" || echo "busy-neighbour: $eng $ty t$t $cond failed (see $f.err)" >&2 ;;
    peer)
      timeout 600 bash "$here/peer-llama.sh" "$m" -p "$pp" -n "$ngen" -r "$preps" -t "$t" -o json \
        > "$f" 2> "$f.err" || echo "busy-neighbour: llama.cpp $ty t$t $cond failed or ran over 600 s" >&2 ;;
  esac
  [ "$cond" = loaded ] && stop_spinners
  return 0
}

read -r la0 _ < /proc/loadavg
tests="tg$ngen"; [ "$nprompt" -gt 0 ] && tests="pp$nprompt, $tests"
echo "busy-neighbour: $(nproc) CPUs, load average $la0 at the start; engines: $engines;" \
     "types: $types; $rounds rounds of $tests" >&2
for r in $(seq "$rounds"); do
  conds=$conds_all; [ $((r % 2)) = 0 ] && conds=$(echo "$conds_all" | tr ' ' '\n' | tac | tr '\n' ' ')
  order=$engines; [ $((r % 2)) = 0 ] && order=$(echo "$engines" | tr ' ' '\n' | tac | tr '\n' ' ')
  for ty in $types; do
    for cond in $conds; do
      for t in $threads; do
        for eng in $order; do
          echo "busy-neighbour: round $r/$rounds $ty $cond t$t $eng" >&2
          run_one "$eng" "$ty" "$t" "$cond" "$r"
        done
      done
    done
  done
  read -r la _ < /proc/loadavg
  echo "busy-neighbour: round $r done, load average $la" >&2
done
read -r la1 _ < /proc/loadavg

python3 - "$out" "$ngen" "$nprompt" "$la0" "$la1" "$spinners" "${pin:-any}" "$types" "$threads" "$engines" <<'PY'
import glob, json, os, re, statistics as st, sys
d, ngen, nprompt, la0, la1, nspin, pin = sys.argv[1:8]
types, threads, engines = sys.argv[8].split(), sys.argv[9].split(), sys.argv[10].split()
ngen, nprompt = int(ngen), int(nprompt)
S = {}   # (eng, ty, t, cond, test) -> samples (t/s)
L = {}   # (eng, ty, t, cond) -> other-load figures (cores)
solo = {}  # (ty, t, cond) -> [solo ms, works]
for f in glob.glob(f"{d}/*.json"):
    eng, ty, t, cond, _ = os.path.basename(f)[:-5].split("-")
    t = t[1:]
    try:
        j = json.load(open(f))
    except Exception:
        continue
    if eng == "peer":
        if ngen > 0: S.setdefault((eng, ty, t, cond, f"tg{ngen}"), []).extend(j["tg"]["samples"])
        if nprompt > 0: S.setdefault((eng, ty, t, cond, f"pp{nprompt}"), []).extend(j["pp"]["samples"])
        continue
    for row in j:
        S.setdefault((eng, ty, t, cond, row["test"]), []).extend(row.get("samples_ts") or [row["median_ts"]])
        if row.get("other_load_cores") is not None:
            L.setdefault((eng, ty, t, cond), []).append(row["other_load_cores"])
    if eng == "new" and os.path.exists(f + ".err"):
        m = re.findall(r"(\d+) solo periods \(([\d.]+) ms\)", open(f + ".err").read())
        if m: solo.setdefault((ty, t, cond), []).append(float(m[-1][1]))
name = {"new": "hx (this build)", "base": "hx (base)", "peer": "llama.cpp"}
med = lambda k: st.median(S[k]) if S.get(k) else None
fmt = lambda v: "—" if v is None else f"{v:.1f}"
tests = ([f"pp{nprompt}"] if nprompt > 0 else []) + [f"tg{ngen}"]
print(f"machine: {os.cpu_count()} CPUs; load average {la0} at the start, {la1} at the end; "
      f"neighbour: {nspin} spinning process(es), pinned to CPU {pin}")
print()
print("| model | test | threads | neighbour | " + " | ".join(name[e] + " t/s" for e in engines) +
      " | other load, cores (hx) |")
print("|---|---|--:|---|" + "--:|" * len(engines) + "--:|")
for ty in types:
    for test in tests:
        for cond in ("idle", "loaded"):
            for t in threads:
                cells = []
                for e in engines:
                    k = (e, ty, t, cond, test)
                    v = med(k)
                    cells.append(f"{fmt(v)} ({len(S.get(k, []))})" if v is not None else "—")
                if all(c == "—" for c in cells): continue
                lo = L.get(("new", ty, t, cond))
                print(f"| qwen3-0.6b-{ty} | {test} | {t} | {cond} | " + " | ".join(cells) +
                      f" | {st.median(lo):.2f} |" if lo else " | ? |")
print()
print("(median t/s over all samples of all rounds; the count of samples in brackets. 'other load' "
      "is engine bench's estimate of the cores kept busy by other processes, the spinner included.)")
print()
def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "—"
tg = f"tg{ngen}"
hdr = ["model", "hx t2/t1 loaded", "hx t2/t1 idle"]
if "peer" in engines: hdr += ["hx/llama.cpp t2 loaded", "hx/llama.cpp t2 idle"]
if "base" in engines: hdr += ["this/base t1 idle", "this/base t2 idle", "this/base t2 loaded"]
hdr += ["solo ms per loaded t2 run (this build)"]
print("| " + " | ".join(hdr) + " |")
print("|---|" + "--:|" * (len(hdr) - 1))
for ty in types:
    g = lambda e, t, c, test=tg: med((e, ty, t, c, test))
    row = [f"qwen3-0.6b-{ty}", ratio(g("new", "2", "loaded"), g("new", "1", "loaded")),
           ratio(g("new", "2", "idle"), g("new", "1", "idle"))]
    if "peer" in engines:
        row += [ratio(g("new", "2", "loaded"), g("peer", "2", "loaded")),
                ratio(g("new", "2", "idle"), g("peer", "2", "idle"))]
    if "base" in engines:
        row += [ratio(g("new", "1", "idle"), g("base", "1", "idle")),
                ratio(g("new", "2", "idle"), g("base", "2", "idle")),
                ratio(g("new", "2", "loaded"), g("base", "2", "loaded"))]
    s = solo.get((ty, "2", "loaded"))
    row += [f"{st.median(s):.0f}" if s else "—"]
    print("| " + " | ".join(row) + " |")
if nprompt > 0 and "base" in engines:
    print()
    for ty in types:
        pt = f"pp{nprompt}"
        print(f"pp{nprompt} qwen3-0.6b-{ty}: this/base t2 idle "
              f"{ratio(med(('new', ty, '2', 'idle', pt)), med(('base', ty, '2', 'idle', pt)))}, "
              f"t1 idle {ratio(med(('new', ty, '1', 'idle', pt)), med(('base', ty, '1', 'idle', pt)))}")
PY
echo "(raw results: $out)"
