#!/usr/bin/env bash
# Every real-GPU measurement and check of docs/BENCHMARKS.md in one go, on a GPU host with PyTorch
# (the lent H200 machines run it through the `device` tool; wheels for what they lack go in .whl/,
# installed with `pip install --no-deps --target /tmp/site .whl/*.whl`, then PYTHONPATH=/tmp/site:.
# and PATH=/tmp/site/bin:$PATH so that the nvitop and gpustat commands are found too):
#
#     bash bench/on_gpu_host.sh OUTDIR NAME
#
# Writes OUTDIR/{sample_cost,clean_time}_NAME.{txt,json}, gpu_tests_NAME.log (tests/gpu, then the
# dashboard driven headless on this host by scripts/real_gpu_check.py) and screens_NAME.tgz.
# Every process these start is ended by PID; nothing here changes a GPU setting.
set -uo pipefail
out=${1:?usage: bash bench/on_gpu_host.sh OUTDIR NAME}
name=${2:?usage: bash bench/on_gpu_host.sh OUTDIR NAME}
mkdir -p "$out"
cd "$(dirname "$0")/.."
{
    date -u
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv
    python3 --version
    python3 -m pytest -q -p no:cacheprovider tests/gpu 2>&1 | tail -15
    python3 scripts/real_gpu_check.py "$out/screens" 2>&1 | tail -30
} >"$out/gpu_tests_$name.log" 2>&1
tar -C "$out" -czf "$out/screens_$name.tgz" screens 2>/dev/null && rm -rf "$out/screens"
python3 bench/sample_cost.py --samples 300 --spawns 15 --jobs 3 --out "$out/sample_cost_$name.json" \
    >"$out/sample_cost_$name.txt" 2>&1
# The ghost job forks from a threaded PyTorch process on purpose: Python's warning about that is noise.
python3 -W "ignore::DeprecationWarning" bench/clean_time.py --runs 10 --gib 4 --term-timeout 2 \
    --out "$out/clean_time_$name.json" >"$out/clean_time_$name.txt" 2>&1
tail -n 30 "$out"/*.txt "$out/gpu_tests_$name.log"
