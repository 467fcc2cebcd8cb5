#!/usr/bin/env bash
# The real-GPU checks of the teams' wave (`gputui serve`, attached terminals, the sources), in one go
# on a GPU host with PyTorch (the lent H100/H200 machines run it through the `device` tool; wheels
# for what they lack in .whl/):
#
#     bash bench/gpu_issue37.sh OUTDIR
#
# Writes OUTDIR/gpu_issue37.log: the GPU's facts, tests/gpu whole (the probe reads cgroups through
# its pod-aware reader now), bench/gpu_serve_check.py (a hub over this GPU: a CUDA job seen, served,
# attached, stopped for an operator, its memory back), bench/metrics_scrape_hub.py on two cores, and
# bench/serve_load.py with the hub pinned
# to two cores and the clients on the others. Every process these start is ended by PID; nothing
# here changes a GPU setting.
set -uo pipefail
out=${1:?usage: bash bench/gpu_issue37.sh OUTDIR}
mkdir -p "$out"
cd "$(dirname "$0")/.."
{
    date -u
    cat COMMIT 2>/dev/null || git log -1 --format="commit %H %s" 2>/dev/null || true
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv
    python3 --version
    nproc
    echo "--- tests/gpu whole"
    python3 -m pytest -q -p no:cacheprovider tests/gpu 2>&1 | tail -8
    echo "--- bench/gpu_serve_check.py"
    python3 bench/gpu_serve_check.py
    echo "exit $?"
    echo "--- bench/metrics_scrape_hub.py (the hub's /metrics at 1,024 hosts), on cores 0-1"
    taskset -c 0,1 python3 bench/metrics_scrape_hub.py --out-dir "$out" 2>&1 | tail -20
    echo "--- bench/serve_load.py, hub on cores 0-1, clients on 2-15"
    python3 bench/serve_load.py --hub-cpus 0,1 --client-cpus 2-15 --name h100 --out-dir "$out"
    echo "exit $?"
} >"$out/gpu_issue37.log" 2>&1
cat "$out/gpu_issue37.log"
