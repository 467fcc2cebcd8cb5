#!/usr/bin/env bash
# Issue 11/12's real-GPU checks and measurements in one go (run through the `device` tool, wheels for
# what the host lacks installed under /tmp/site as bench/on_gpu_host.sh says):
#
#     bash bench/gpu_readiness.sh OUTDIR NAME
#
# tests/gpu (among them test_readiness_gpu.py: accounting of a plain job and a ghost, the preflight reading and
# its nulls, per-process utilization of a busy job, `gputui wait` after `gputui clean`), the
# dashboard driven headless (scripts/real_gpu_check.py: main screen, GPU view, process detail, plan,
# after; screens_NAME.tgz), bench/startup.py (whole commands) and bench/sample_cost.py with busy jobs
# (proc util on and off), and bench/flood.py (the dashboard under a flooding host, on this CPU).
# Every process these start is ended by PID; nothing here changes a GPU setting.
set -uo pipefail
out=${1:?usage: bash bench/gpu_readiness.sh OUTDIR NAME}
name=${2:?usage: bash bench/gpu_readiness.sh OUTDIR NAME}
mkdir -p "$out"
cd "$(dirname "$0")/.."
{
    date -u
    nvidia-smi --query-gpu=index,name,memory.total,driver_version,persistence_mode --format=csv
    python3 --version
    python3 -m pytest -q -s -p no:cacheprovider tests/gpu 2>&1 | tail -200
    python3 scripts/real_gpu_check.py "$out/screens" 2>&1 | tail -40
    # The reset ladder on a real GPU: the dry run only (what blocks a reset); never a reset here.
    echo "== gputui clean local --reset-gpu 0 --dry-run"
    python3 -m gputui clean local --reset-gpu 0 --dry-run </dev/null 2>&1 | tail -30
    echo "exit ${PIPESTATUS[0]}"
} >"$out/readiness_gpu_$name.log" 2>&1
python3 bench/startup.py --runs 10 --gib 4 --out "$out/startup_$name.json" >"$out/startup_$name.txt" 2>&1
# The same as installed: `pip install` compiles a package's modules, and a later run of a source tree
# finds them compiled, unless PYTHONDONTWRITEBYTECODE is set (as on the lent hosts: the run above
# compiled everything again for every command). gputui compiled here, and a compiled copy of this
# host's pynvml first on the path; the host's own environment is left as it is.
site=$(mktemp -d)
cp "$(python3 -c 'import importlib.util; print(importlib.util.find_spec("pynvml").origin)')" "$site/"
python3 -m compileall -q gputui "$site/pynvml.py"
PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" python3 bench/startup.py --runs 10 --gib 4 \
    --out "$out/startup_installed_$name.json" >"$out/startup_installed_$name.txt" 2>&1
rm -rf "$site"
python3 bench/sample_cost.py --samples 200 --spawns 5 --jobs 3 --busy \
    --out "$out/sample_cost_busy_$name.json" >"$out/sample_cost_busy_$name.txt" 2>&1
{ echo; echo "import time of gputui.cli, the largest (us: self | cumulative):"; python3 -X importtime -c "import gputui.cli" 2>&1 | sort -t'|' -k2 -n | tail -12; } >>"$out/startup_$name.txt"
python3 bench/flood.py --seconds 30 --keys 120 --out "$out/flood_$name.json" >"$out/flood_$name.txt" 2>&1
tar -C "$out" -czf "$out/screens_$name.tgz" screens 2>/dev/null && rm -rf "$out/screens"
tail -n 40 "$out/readiness_gpu_$name.log" "$out/startup_$name.txt" "$out/startup_installed_$name.txt" \
    "$out/sample_cost_busy_$name.txt" \
    "$out/flood_$name.txt"
