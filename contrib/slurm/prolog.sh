#!/bin/sh
# gputui's Slurm Prolog (docs/SLURM.md): before a job starts on this node, wait until the GPUs Slurm
# gave it are ready (`gputui wait`). Slurm drains the node (and requeues the job) when a Prolog exits
# non-zero, so this one does only when the GPUs cannot be used without an administrator:
#
#   ready                                                                      exit 0
#   busy: after the timeout a live process still uses or holds a GPU (another
#         job's, or one still ending), and nothing else is wrong with it        exit 0, logged
#         (GPUTUI_PROLOG_DRAIN_BUSY=1: exit 1, drain)
#         (a MIG instance Slurm names is judged alone, by the same rules)
#   unusable: memory that no live process holds (ghost, orphaned, outside, or
#         used with no process), the GPU reports an error or is not in the
#         sample, the probe gave no sample, a condition the site asked for
#         (GPUTUI_WAIT_OPTIONS: throttle, persistence, temperature)               exit 1, drain
#   no NVIDIA driver or GPU (gputui wait exit 3), a GPU that Slurm names and the
#         node does not have (exit 2), gputui missing or failing                  exit 1, drain
#   a GPU list that is not one Slurm writes ("all", "", ",,,", "0-3", a word):
#         nothing waited on                                                      exit 1, drain
#   no GPU in the job                                                          exit 0, nothing waited
#
# Each run appends one JSON line to $GPUTUI_SLURM_LOG: time, script, slurm_job, node, gpus,
# verdict, exit, drain, detail, gputui_exit and gputui (wait's own JSON document, or null).
#
# Settings. slurmd runs this with Slurm's variables only (no PATH, none of its own environment):
# set these in a wrapper that Prolog= names (`export GPUTUI_...; exec .../prolog.sh`), or edit the
# defaults below.
#   GPUTUI                    the gputui command (default: gputui, on the PATH set below)
#   GPUTUI_SLURM_LOG          the JSON lines (default /var/log/gputui/slurm.jsonl)
#   GPUTUI_PROLOG_TIMEOUT     seconds to wait for the GPUs (default 60)
#   GPUTUI_PROLOG_SETTLE      seconds each GPU must stay ready (default 0)
#   GPUTUI_PROLOG_DRAIN_BUSY  1: a GPU still busy after the timeout drains the node too (default 0)
#   GPUTUI_WAIT_OPTIONS       more conditions for `gputui wait`, from: --no-throttle --persistence
#                             --temp-below=C --memory-below=SIZE --util-below=PCT (words checked)
#
# The job's GPUs: SLURM_JOB_GPUS (what slurmd sets for a Prolog), else SLURM_STEP_GPUS, else
# CUDA_VISIBLE_DEVICES, the first one set; GPU indexes (or UUIDs) as gres.conf numbers them, which
# gputui reads as NVML indexes (docs/SLURM.md says when those differ). Only a list as Slurm writes
# one is used: each GPU's index (0 to 999, no sign or leading zero) or whole GPU-/MIG- UUID, joined
# by commas, each once. Anything else could name GPUs that are not the job's (`gputui wait` without
# --gpu, or with `--gpu all`, judges every GPU of the node): it is refused and nothing is waited on.

PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
umask 077

gputui=${GPUTUI:-gputui}
log=${GPUTUI_SLURM_LOG:-/var/log/gputui/slurm.jsonl}
timeout=${GPUTUI_PROLOG_TIMEOUT:-60}
settle=${GPUTUI_PROLOG_SETTLE:-0}
drain_busy=${GPUTUI_PROLOG_DRAIN_BUSY:-0}
job=${SLURM_JOB_ID:-}
node=${SLURMD_NODENAME:-$(uname -n)}

# A JSON string's inside, showing untrusted text as gputui does: a control character or a byte
# outside ASCII as an escape (\n, \t, \r, \e, \xNN), never dropped (a dropped newline would show
# "0<newline>1" as GPU 01); backslash and quote escaped for JSON. At most 300 characters of the text.
text() {
    GPUTUI_TEXT=$1 LC_ALL=C awk 'BEGIN {
        for (i = 1; i < 256; i++) code[sprintf("%c", i)] = i
        s = ENVIRON["GPUTUI_TEXT"]; n = length(s); cut = n > 300; if (cut) n = 297
        for (i = 1; i <= n; i++) {
            c = substr(s, i, 1); b = code[c]
            if (c == "\\" || c == "\"") out = out "\\" c
            else if (b >= 32 && b < 127) out = out c
            else if (c == "\n") out = out "\\\\n"
            else if (c == "\t") out = out "\\\\t"
            else if (c == "\r") out = out "\\\\r"
            else if (b == 27) out = out "\\\\e"
            else out = out sprintf("\\\\x%02x", b)
        }
        printf "%s%s", out, (cut ? "..." : "")
    }'
}

# At most 40 characters of a value the script could not read, "..." where it is cut: a message that
# quotes one keeps room for what was decided.
short() {
    printf '%.40s' "$1"
    if [ "${#1}" -gt 40 ]; then printf '...'; fi
}

# The job's GPUs: the first of these that is set, even when empty (an empty SLURM_JOB_GPUS must not
# hand the choice to a CUDA_VISIBLE_DEVICES=all behind it).
if [ -n "${SLURM_JOB_GPUS+set}" ]; then
    gpus_from=SLURM_JOB_GPUS gpus=$SLURM_JOB_GPUS
elif [ -n "${SLURM_STEP_GPUS+set}" ]; then
    gpus_from=SLURM_STEP_GPUS gpus=$SLURM_STEP_GPUS
elif [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
    gpus_from=CUDA_VISIBLE_DEVICES gpus=$CUDA_VISIBLE_DEVICES
else
    gpus_from= gpus=
fi

# Why $gpus is not a list of the job's GPUs as Slurm writes one (nothing when it is). slurmd joins
# each of the job's GPUs with ",": its gres index ("%d"), or in CUDA_VISIBLE_DEVICES its UUID
# (gres.conf UniqueId, MIG), and sets the variable only when there is one. Anything else ("all",
# an empty item, a range, a sign, a word, a UUID's prefix) may name GPUs that are not the job's.
hex='[0-9a-fA-F]'
hex4=$hex$hex$hex$hex
uuid=$hex4$hex4-$hex4-$hex4-$hex4-$hex4$hex4$hex4
gpu_list_problem() {
    if [ -z "$gpus" ]; then
        printf 'set but empty (Slurm sets it only with a GPU in it)'
        return
    fi
    if [ "${#gpus}" -gt 8192 ]; then
        printf 'longer than 8192 characters'
        return
    fi
    rest=$gpus, seen=,
    while [ -n "$rest" ]; do
        item=${rest%%,*} rest=${rest#*,}
        case $item in
            0 | [1-9] | [1-9][0-9] | [1-9][0-9][0-9] | GPU-$uuid | MIG-$uuid) ;;
            '') printf 'an empty item'; return ;;
            *) printf '"%s" is not a GPU index (0 to 999) or a whole GPU-/MIG- UUID' "$(short "$item")"; return ;;
        esac
        case $seen in
            *",$item,"*) printf 'GPU %s twice' "$item"; return ;;
        esac
        seen=$seen$item,
    done
}

# One JSON line in the log (and on stdout, which slurmd keeps in its own log at debug level).
say() { # verdict exit detail gputui_exit gputui_json
    if [ "$2" -eq 0 ]; then drain=false; else drain=true; fi
    line=$(printf '{"time":"%s","script":"prolog","slurm_job":"%s","node":"%s","gpus":"%s","verdict":"%s","exit":%d,"drain":%s,"detail":"%s","gputui_exit":%s,"gputui":%s}' \
        "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(text "$job")" "$(text "$node")" "$(text "$gpus")" "$1" "$2" \
        "$drain" "$(text "$3")" "$4" "$5")
    mkdir -p "$(dirname "$log")" 2>/dev/null
    printf '%s\n' "$line" >>"$log" 2>/dev/null || printf 'gputui prolog: cannot write %s\n' "$log" >&2
    printf '%s\n' "$line"
}

finish() { # verdict exit detail gputui_exit gputui_json
    say "$@"
    exit "$2"
}

case $job in
    '' | *[!0-9]*) finish error 0 "no SLURM_JOB_ID: not run by Slurm, nothing done" null null ;;
esac
if [ -z "$gpus_from" ] || [ "$gpus" = NoDevFiles ]; then
    finish no-gpus 0 "the job has no GPU" null null
fi
refused=$(gpu_list_problem)
if [ -n "$refused" ]; then
    finish error 1 "GPU list not understood, nothing waited on: $gpus_from=\"$(short "$gpus")\": $refused" null null
fi
case $drain_busy in
    0 | 1) ;;
    *) finish error 1 "GPUTUI_PROLOG_DRAIN_BUSY is not 0 or 1" null null ;;
esac
case $timeout$settle in
    *[!0-9.]*) finish error 1 "GPUTUI_PROLOG_TIMEOUT or GPUTUI_PROLOG_SETTLE is not a number of seconds" null null ;;
esac

set -- wait --json --timeout "$timeout" --settle "$settle"
rest=$gpus, # checked above: each item a GPU of the job's
while [ -n "$rest" ]; do
    set -- "$@" --gpu "${rest%%,*}"
    rest=${rest#*,}
done
set -f # the options are split on spaces, never globbed
oldifs=$IFS
IFS=' '
for option in ${GPUTUI_WAIT_OPTIONS:-}; do
    case $option in
        --no-throttle | --persistence | --temp-below=[0-9]* | --memory-below=[0-9]* | --util-below=[0-9]*)
            set -- "$@" "$option" ;;
        *) finish error 1 "GPUTUI_WAIT_OPTIONS: $option is not a condition of gputui wait" null null ;;
    esac
done
IFS=$oldifs
set +f

errors=$(mktemp "${TMPDIR:-/tmp}/gputui-prolog.XXXXXX") || finish error 1 "mktemp failed" null null
out=$("$gputui" "$@" 2>"$errors")
code=$?
problem=$(tail -n 1 "$errors")
rm -f "$errors"
doc=null
case $out in
    '{'*'}') doc=$(printf '%s\n' "$out" | sed 's/^ *//' | tr -d '\n') ;; # one line (no string holds a newline)
esac

case $code in
    0) finish ready 0 "" "$code" "$doc" ;;
    1) ;;
    2) finish unusable 1 "a GPU Slurm names is not on this node, or gputui was misused: $problem" "$code" "$doc" ;;
    3) finish unusable 1 "no NVIDIA driver or GPU: $problem" "$code" "$doc" ;;
    *) finish error 1 "gputui wait failed ($code): $problem" "$code" "$doc" ;;
esac

# Not ready by the timeout: each GPU's conditions (wait's JSON, one key a line: "N": { opens a GPU,
# "G:I.C": { a MIG instance, whose "uuid" follows; "condition": "..." is one of its conditions;
# "no_sample"/"not_judged": a host it could not judge). busy: "processes" among them, and nothing
# but what a process's own use explains. A UUID is said only when it is one (MIG- and 32 hex digits).
classes=$(printf '%s\n' "$out" | awk -v uuid="^\"MIG-$uuid\"\$" '
    function flush() {
        if (gpu == "" || conds == "") return
        hard = 0; n = split(conds, c, " ")
        for (i = 1; i <= n; i++)
            if (c[i] !~ /^(processes|memory|memory-below|utilization|temperature)$/) hard = 1
        if (conds !~ /(^| )processes( |$)/) hard = 1
        printf "%s%s %s: %s", sep, (hard ? "unusable" : "busy"), gpu, conds; sep = "; "
    }
    /^ *"(no_sample|not_judged)": / { v = $0; sub(/^ */, "", v); printf "%sunjudged: %s", sep, v; sep = "; " }
    /^ *"[0-9]+": [{] *$/ { flush(); gpu = $1; gsub(/[":]/, "", gpu); gpu = "GPU " gpu; conds = "" }
    /^ *"[0-9]+:[0-9]+[.]([0-9]+|[?])": [{] *$/ { flush(); gpu = $1; gsub(/"/, "", gpu); sub(/:$/, "", gpu)
                                                   gpu = "MIG instance " gpu; conds = "" }
    /^ *"uuid": "/ && gpu ~ /^MIG/ { v = $2; sub(/,$/, "", v); if (v ~ uuid) { gsub(/"/, "", v); gpu = gpu " (" v ")" } }
    /^ *"condition": "/ { v = $0; sub(/^ *"condition": "/, "", v); sub(/".*$/, "", v)
                          conds = (conds == "" ? v : conds " " v) }
    END { flush() }')
case $classes in
    *unusable* | *unjudged*) finish unusable 1 "$classes" "$code" "$doc" ;;
    *busy*)
        if [ "$drain_busy" = 1 ]; then finish busy 1 "$classes" "$code" "$doc"; fi
        finish busy 0 "$classes" "$code" "$doc" ;;
    *) finish unusable 1 "not ready, and gputui wait said not why: $problem" "$code" "$doc" ;;
esac
