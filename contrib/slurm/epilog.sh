#!/bin/sh
# gputui's Slurm Epilog (docs/SLURM.md): after a job, stop what it left on this node and prove its
# GPUs free (`gputui clean`), and log the verdict as one JSON line. Slurm drains the node when an
# Epilog exits non-zero, so this one does exactly when the job's GPUs are not clean after it:
#
#   1. `gputui clean --slurm-job $SLURM_JOB_ID`: the job's processes still running anywhere on the
#      node (found by their cgroup, job_<id>), root first, verified gone with their GPU memory.
#      Nothing of the job left (the usual case: slurmstepd ended it) is fine.
#   2. `gputui clean --gpu N ...` on the job's GPUs (unless GPUTUI_EPILOG_GPUS=0, for GPUs that jobs
#      share): whatever still holds them is stopped, and each GPU is verified clean: nothing
#      listed, no holder, memory back at idle.
#
#   every step done (or nothing to do)                                             exit 0
#   a GPU not clean (a survivor, ghost or orphaned memory: only a reset frees it), an outcome
#   unknown, refused (a protected process, permission), no driver, gputui missing or failing
#                                                                                   exit 1, drain
#   a GPU list that is not one Slurm writes ("all", "", ",,,", "0-3", a word): step 1 only, no
#   GPU cleaned, since the job's GPUs cannot be proven clean                       exit 1, drain
#
# The job's GPUs: SLURM_JOB_GPUS, else SLURM_STEP_GPUS, else CUDA_VISIBLE_DEVICES, the first one set.
# Only a list as Slurm writes one is used: each GPU's index (0 to 999, no sign or leading zero) or
# whole GPU-/MIG- UUID, joined by commas, each once. Anything else could name GPUs that are not the
# job's (`gputui clean --gpu all` stops every GPU process of the node, other jobs' too).
#
# Each run appends one JSON line to $GPUTUI_SLURM_LOG: time, script, slurm_job, node, gpus, verdict
# (clean, not-clean, error, no-gpus), exit, drain, detail, and each step's exit code and `gputui
# clean --json` document (job_exit, job_clean, gpus_exit, gpus_clean; null when not run). Every
# signal is in the audit log ($GPUTUI_AUDIT_LOG) before it is sent.
#
# Settings (slurmd passes no environment of its own: set them in a wrapper that Epilog= names, or
# edit the defaults below):
#   GPUTUI              the gputui command (default: gputui, on the PATH set below)
#   GPUTUI_SLURM_LOG    the JSON lines (default /var/log/gputui/slurm.jsonl)
#   GPUTUI_AUDIT_LOG    gputui's audit log of plans and signals (default /var/log/gputui/actions.jsonl)
#   GPUTUI_EPILOG_GPUS  0: leave the job's GPUs to the jobs that share them; only step 1 (default 1)

PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
umask 077

gputui=${GPUTUI:-gputui}
log=${GPUTUI_SLURM_LOG:-/var/log/gputui/slurm.jsonl}
audit=${GPUTUI_AUDIT_LOG:-/var/log/gputui/actions.jsonl}
clean_gpus=${GPUTUI_EPILOG_GPUS:-1}
job=${SLURM_JOB_ID:-}
node=${SLURMD_NODENAME:-$(uname -n)}
job_exit=null job_clean=null gpus_exit=null gpus_clean=null

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

finish() { # verdict exit detail
    if [ "$2" -eq 0 ]; then drain=false; else drain=true; fi
    line=$(printf '{"time":"%s","script":"epilog","slurm_job":"%s","node":"%s","gpus":"%s","verdict":"%s","exit":%d,"drain":%s,"detail":"%s","job_exit":%s,"job_clean":%s,"gpus_exit":%s,"gpus_clean":%s}' \
        "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(text "$job")" "$(text "$node")" "$(text "$gpus")" "$1" "$2" \
        "$drain" "$(text "$3")" "$job_exit" "$job_clean" "$gpus_exit" "$gpus_clean")
    mkdir -p "$(dirname "$log")" "$(dirname "$audit")" 2>/dev/null
    printf '%s\n' "$line" >>"$log" 2>/dev/null || printf 'gputui epilog: cannot write %s\n' "$log" >&2
    printf '%s\n' "$line"
    exit "$2"
}

# `gputui clean ARGS --yes --json`: sets `out` (its JSON on one line, or null), `code`, `problem`.
clean() {
    errors=$(mktemp "${TMPDIR:-/tmp}/gputui-epilog.XXXXXX") || finish error 1 "mktemp failed"
    mkdir -p "$(dirname "$audit")" 2>/dev/null
    raw=$("$gputui" clean "$@" --yes --json --log "$audit" 2>"$errors")
    code=$?
    problem=$(tail -n 1 "$errors")
    rm -f "$errors"
    out=null
    case $raw in
        '{'*'}') out=$(printf '%s\n' "$raw" | sed 's/^ *//' | tr -d '\n') ;; # no string holds a newline
    esac
}

case $job in
    '' | *[!0-9]*) finish error 0 "no SLURM_JOB_ID: not run by Slurm, nothing done" ;;
esac
if [ "$gpus" = NoDevFiles ]; then
    gpus_from= gpus=
fi
# Why step 2 cannot run, found before step 1, which needs only the job's ID and runs either way.
refused=
case $clean_gpus in
    0) ;; # the list is not used: not judged
    1) if [ -n "$gpus_from" ]; then
           refused=$(gpu_list_problem)
           if [ -n "$refused" ]; then
               refused="GPU list not understood, the job's GPUs not cleaned nor proven clean: $gpus_from=\"$(short "$gpus")\": $refused"
           fi
       fi ;;
    *) refused="GPUTUI_EPILOG_GPUS is \"$(short "$clean_gpus")\", not 0 or 1: the job's GPUs not cleaned nor proven clean" ;;
esac

# 1. The job's own processes, wherever they are.
clean --slurm-job "$job"
job_exit=$code job_clean=$out
case $code in
    0) ;;
    2) case $problem in
           *"no Slurm job"*) ;; # nothing of the job is left: the usual case
           *) finish error 1 "gputui clean --slurm-job: $problem${refused:+; $refused}" ;;
       esac ;;
    *) finish not-clean 1 "the job's processes: gputui clean exit $code: $problem${refused:+; $refused}" ;;
esac

# 2. The job's GPUs.
if [ -n "$refused" ]; then
    finish error 1 "$refused; its processes: exit $job_exit"
fi
if [ -z "$gpus_from" ]; then
    finish no-gpus 0 "the job had no GPU; its processes: exit $job_exit"
fi
if [ "$clean_gpus" = 0 ]; then
    finish clean 0 "the job's processes only (GPUTUI_EPILOG_GPUS=0)"
fi
set --
rest=$gpus, # checked above: each item a GPU of the job's
while [ -n "$rest" ]; do
    set -- "$@" --gpu "${rest%%,*}"
    rest=${rest#*,}
done
clean "$@"
gpus_exit=$code gpus_clean=$out
case $code in
    0) finish clean 0 "" ;;
    *) finish not-clean 1 "the job's GPUs: gputui clean exit $code: $problem" ;;
esac
