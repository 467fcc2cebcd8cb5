#!/usr/bin/env bash
# Issue 39's measurements on a real GPU host (the lent H100/H200 machines run it through the `device`
# tool, with the wheels of .whl/ installed and an OpenSSH server packed by bench/carry_openssh.sh):
#
#     bash bench/gpu_issue39.sh OUTDIR [OSSH_DIR] [PARTS]
#
# PARTS (default "sample clean fleet"): which of the three rows to measure.
#   sample: bench/sample_cost.py --busy (3 CUDA jobs doing matrix multiplies) with the peers in the same
#           run (nvitop's API, gpustat, nvidia-smi spawns), the probe's own split, its preflight calls
#           and a cProfile;
#   clean:  bench/clean_path.py (`gputui clean --pid P --yes` of a 4 GiB job, traced, and untraced,
#           next to `kill P; sleep 1; nvidia-smi`, and the floor part by part) and what
#           `gputui.cli.clean` imports; CLEAN_BEFORE=DIR runs the same bench from another tree too;
#   gputests: tests/gpu whole (real NVML, real CUDA jobs the tests start and reap);
#   fleet:  bench/fleet_scale.py over real loopback OpenSSH at FLEET_HOSTS (default 256,512,1024)
#           hosts, the app on cores 0-1 and the sshd servers, probes and jobs on 2-15. On the lent
#           H100 host 1,024 hosts took 227 s to connect (32 at a time) and about 5 minutes in all:
#           the three counts want a call of their own (`... OUT OSSH fleet`, FLEET_TIMEOUT=560), and
#           nothing else running on the host (each count's table is saved as it ends).
# Bytecode is compiled first (as `pip install` leaves a package). Every process these start is ended
# by PID; nothing here changes a GPU setting.
set -uo pipefail
out=${1:?usage: bash bench/gpu_issue39.sh OUTDIR [OSSH_DIR] [PARTS]}
ossh=${2:-}
parts=${3:-sample clean fleet}
mkdir -p "$out"
cd "$(dirname "$0")/.."
unset PYTHONDONTWRITEBYTECODE
export PYTHONUNBUFFERED=1
log="$out/gpu_issue39.log"
{
    date -u
    cat COMMIT 2>/dev/null || git log -1 --format="commit %H %s" 2>/dev/null || true
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv
    python3 --version; nproc; uname -r
    python3 -m compileall -q -j0 gputui bench tests/support /tmp/site 2>/dev/null
    python3 -m compileall -q "$(python3 -c 'import pynvml; print(pynvml.__file__)')" 2>/dev/null
} >"$log" 2>&1
for part in $parts; do
    case $part in
    sample)
        echo "=== sample cost" >>"$log"
        timeout 240 python3 bench/sample_cost.py --busy --samples "${SAMPLES:-400}" --profile "${SAMPLES:-400}" \
            --out "$out/sample_cost.json" >>"$log" 2>&1
        ;;
    clean)
        echo "=== clean path" >>"$log"
        timeout 300 python3 bench/clean_path.py --runs "${CLEAN_RUNS:-8}" --out "$out/clean_path.json" >>"$log" 2>&1
        if [ -n "${CLEAN_BEFORE:-}" ]; then  # another tree (the code before a change), same host, same call
            echo "=== clean path, the tree at $CLEAN_BEFORE" >>"$log"
            (cd "$CLEAN_BEFORE" && timeout 200 python3 bench/clean_path.py --runs "${CLEAN_RUNS:-8}" \
                --out "$out/clean_path_before.json") >>"$log" 2>&1
        fi
        echo "=== what gputui.cli.clean imports (-X importtime, us, cumulative, top 25)" >>"$log"
        python3 -X importtime -c "import gputui.cli.clean" 2>&1 | sort -t'|' -k2 -n | tail -25 >>"$log"
        ;;
    gputests)
        echo "=== tests/gpu" >>"$log"
        timeout 300 python3 -m pytest -q -p no:cacheprovider -rs tests/gpu >>"$log" 2>&1
        ;;
    fleet)
        echo "=== fleet scale over OpenSSH" >>"$log"
        if [ -n "$ossh" ]; then
            export PATH="$(cd "$ossh" && pwd)/bin:$PATH"
            id sshd >/dev/null 2>&1 || useradd -r -M -d /run/sshd -s /usr/sbin/nologin sshd \
                || echo 'sshd:x:999:65534::/run/sshd:/usr/sbin/nologin' >>/etc/passwd
            mkdir -p /run/sshd
        fi
        ulimit -n 65536 2>/dev/null || true
        command -v sshd >>"$log"; sshd -V >>"$log" 2>&1
        timeout "${FLEET_TIMEOUT:-560}" python3 bench/fleet_scale.py --hosts "${FLEET_HOSTS:-256,512,1024}" \
            --seconds "${FLEET_SECONDS:-20}" --warmup 3 --sshd 16 --connect-at-once 32 --remote same \
            --app-cpus 0,1 --remote-cpus 2-15 --name gpuhost --out-dir "$out" >>"$log" 2>&1
        echo "fleet exit $?" >>"$log"
        ;;
    esac
done
cat "$log"
