#!/usr/bin/env bash
# The real-GPU checks of the third bad-days round, in one go on a GPU host with PyTorch (the lent
# H100/H200 machines run it through the `device` tool; wheels for what they lack in .whl/):
#
#     bash bench/gpu_issue34.sh OUTDIR
#
# Writes OUTDIR/gpu_issue34.log: the GPU's facts, tests/gpu whole (two gputui runs on one host, the
# first per-process utilization reading among them, verbose with what they print), the probe and CLI
# tests of the same rules, and one `gputui snapshot --json` with another gputui watching beside it.
# Every process these start is ended by PID; nothing here changes a GPU setting.
set -uo pipefail
out=${1:?usage: bash bench/gpu_issue34.sh OUTDIR}
mkdir -p "$out"
cd "$(dirname "$0")/.."
{
    date -u
    git log -1 --format='commit %H %s' 2>/dev/null || true
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv
    python3 --version
    python3 -m pytest -q -p no:cacheprovider -rs tests/gpu/test_peer_gpu.py tests/gpu/test_proc_util_first_gpu.py \
        -s -v 2>&1 | tail -60
    python3 -m pytest -q -p no:cacheprovider tests/gpu tests/probe/test_peers.py tests/probe/test_nvml_reader.py \
        tests/probe/test_bounds.py tests/cli/test_peer_gputui.py 2>&1 | tail -15
} >"$out/gpu_issue34.log" 2>&1
cat "$out/gpu_issue34.log"
