#!/usr/bin/env bash
# The real-GPU checks of "what a new user meets, third look", in one go on a GPU host with PyTorch
# (the lent H100/H200 machines run it through the `device` tool; wheels for what they lack in .whl/):
#
#     bash bench/gpu_issue36.sh OUTDIR
#
# Writes OUTDIR/gpu_issue36.log: the GPU's facts and `nvidia-smi topo -m`, tests/gpu whole (among
# them the topology read through NVML against nvidia-smi's, and samples that keep coming while a
# plan waits), `gputui pick 1 local` and its JSON, and the probe/CLI tests of the same rules. Every
# process these start is ended by PID; nothing here changes a GPU setting.
set -uo pipefail
out=${1:?usage: bash bench/gpu_issue36.sh OUTDIR}
mkdir -p "$out"
cd "$(dirname "$0")/.."
{
    date -u
    cat COMMIT 2>/dev/null || git log -1 --format="commit %H %s" 2>/dev/null || true
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv
    nvidia-smi topo -m || true
    python3 --version
    python3 -m pytest -q -p no:cacheprovider -rs tests/gpu/test_topology_gpu.py tests/gpu/test_plan_live_gpu.py \
        -s -v 2>&1 | tail -40
    echo "--- gputui pick 1 local"
    python3 -m gputui pick 1 local; echo "exit $?"
    python3 -m gputui pick 1 local --format json; echo "exit $?"
    python3 -m gputui pick 1 local --uuid; echo "exit $?"
    echo "--- gputui snapshot local --ascii --gpu 0"
    python3 -m gputui snapshot local --ascii --gpu 0; echo "exit $?"
    echo "--- tests/gpu whole, and the probe's own tests"
    python3 -m pytest -q -p no:cacheprovider tests/gpu tests/probe/test_nvml_reader.py tests/model/test_topology.py \
        tests/cli/test_pick.py 2>&1 | tail -15
} >"$out/gpu_issue36.log" 2>&1
cat "$out/gpu_issue36.log"
