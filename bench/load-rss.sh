#!/usr/bin/env bash
# load-rss.sh — host memory of one `engine run`: the peaks of anonymous memory (RssAnon: heap,
# repacked weights, host copies, lavapipe's "device" memory) and of mapped file pages
# (RssFile: the model's mapping, page cache) and VmHWM (both), sampled from /proc every 10 ms
# while it runs. docs/policies.md ("Weights load where they run") quotes its figures.
#   bench/load-rss.sh ENGINE MODEL [engine run options...]
# prints: peak_anon_mib peak_file_mib hwm_mib (one line)
set -u
engine=${1:?engine} model=${2:?model}
shift 2
"$engine" run -m "$model" -p "Hello" -n 4 --temp 0 -c 256 "$@" >/dev/null 2>/tmp/load-rss.$$.err &
pid=$!
anon=0 file=0 hwm=0
while kill -0 "$pid" 2>/dev/null; do
    if read -r a f h < <(awk '/^RssAnon:/{a=$2} /^RssFile:/{f=$2} /^VmHWM:/{h=$2}
                              END{print a+0, f+0, h+0}' "/proc/$pid/status" 2>/dev/null); then
        [ "$a" -gt "$anon" ] && anon=$a
        [ "$f" -gt "$file" ] && file=$f
        [ "$h" -gt "$hwm" ] && hwm=$h
    fi
    sleep 0.01
done
wait "$pid"
rc=$?
if [ $rc -ne 0 ]; then
    cat /tmp/load-rss.$$.err >&2
    rm -f /tmp/load-rss.$$.err
    exit $rc
fi
rm -f /tmp/load-rss.$$.err
echo "$((anon / 1024)) $((file / 1024)) $((hwm / 1024))"
