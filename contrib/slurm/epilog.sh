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
gpus=${SLURM_JOB_GPUS:-${SLURM_STEP_GPUS:-${CUDA_VISIBLE_DEVICES:-}}}
node=${SLURMD_NODENAME:-$(uname -n)}
job_exit=null job_clean=null gpus_exit=null gpus_clean=null

# A JSON string's inside: printable ASCII only, backslash and quote escaped, at most 300 characters.
text() {
    printf '%s' "$1" | tr -cd ' -~' | cut -c1-300 | sed 's/\\/\\\\/g; s/"/\\"/g'
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
case $gpus in
    NoDevFiles) gpus= ;;
    *[!A-Za-z0-9,-]*) finish error 1 "GPU list from Slurm not understood: $gpus" ;;
esac

# 1. The job's own processes, wherever they are.
clean --slurm-job "$job"
job_exit=$code job_clean=$out
case $code in
    0) ;;
    2) case $problem in
           *"no Slurm job"*) ;; # nothing of the job is left: the usual case
           *) finish error 1 "gputui clean --slurm-job: $problem" ;;
       esac ;;
    *) finish not-clean 1 "the job's processes: gputui clean exit $code: $problem" ;;
esac

# 2. The job's GPUs.
if [ -z "$gpus" ]; then
    finish no-gpus 0 "the job had no GPU; its processes: exit $job_exit"
fi
if [ "$clean_gpus" = 0 ]; then
    finish clean 0 "the job's processes only (GPUTUI_EPILOG_GPUS=0)"
fi
set --
set -f
oldifs=$IFS
IFS=,
for gpu in $gpus; do
    [ -n "$gpu" ] && set -- "$@" --gpu "$gpu"
done
IFS=$oldifs
set +f
clean "$@"
gpus_exit=$code gpus_clean=$out
case $code in
    0) finish clean 0 "" ;;
    *) finish not-clean 1 "the job's GPUs: gputui clean exit $code: $problem" ;;
esac
