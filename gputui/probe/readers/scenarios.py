"""The sim reader's scenarios: the jobs each starts, the driver state it sets, its GPU count.

Apart from the reader (gputui/probe/readers/sim/), so the app's config can check a scenario's name
without importing the sim (its worker source and process machinery): plain tables, stdlib only.
The names are the keys of SCENARIO_JOBS, so a scenario cannot be named without saying what it runs.

Stdlib only, Python >= 3.8 syntax: this runs on monitored hosts.
"""

import time
from typing import Any, Callable, Dict, List, Tuple  # noqa: F401  (used in type comments)

GiB = 1 << 30  # the scenarios' unit of memory (the sim's spawn takes bytes)
MIG_NAME = "NVIDIA H200 MIG %dg.%dgb (sim)"
# GPUs of a sim when the caller does not say (a config has no sim_gpus): DEFAULT_GPUS, or what its
# scenario lists here by variant (variant v: entry v % len, as the demo's jobs alternate by variant).
# The demo's second host (demo-b) is an 8-GPU box, as the benchmarking machines people pick GPUs on:
# its jobs keep GPUs 0-3 and leave 4-7 free.
DEFAULT_GPUS = 4
SCENARIO_GPUS = {
    "demo": (4, 8),
    "jobs": (8,),
}  # type: Dict[str, Tuple[int, ...]]
# demo-b's GPU that the live demo's benchmark (gputui/cli/demod.py) comes and goes on: one its jobs
# leave free, beside a pair that a two-GPU pick finds free.
DEMO_BENCH_GPU = 3

# demo-b's supervisor waits this long before it starts a new worker (supervisord's back-off): longer
# than a clean of its host takes (a job there ignores SIGTERM for the 5 s wait), so a clean is
# verified before the worker comes back, and `J` and the dashboard show it back soon after.
SUPERVISOR_RESTART_S = 15.0

# A scenario's jobs: [(role, SimReader.spawn's keyword arguments)], from (variant, number of GPUs).
JobSpecs = List[Tuple[str, Dict[str, Any]]]


def scenario_gpus(scenario, variant):
    # type: (str, int) -> int
    """How many GPUs a sim of `scenario` and `variant` has when the caller does not say."""
    counts = SCENARIO_GPUS.get(scenario, (DEFAULT_GPUS,))
    return counts[variant % len(counts)]


def _on(gpus, *indexes):
    # type: (int, *int) -> List[int]
    """GPU `indexes` of a sim of `gpus` GPUs: with fewer GPUs than a scenario names, they wrap round."""
    return sorted({i % gpus for i in indexes})


def no_jobs(variant, gpus):
    # type: (int, int) -> JobSpecs
    """A scenario that starts nothing ("empty"; "preflight", whose story is the driver state)."""
    return []


def demo_jobs(variant, gpus):
    # type: (int, int) -> JobSpecs
    """The demo scenario: every kind of process, and every family of them, at once (the "jobs"
    scenario's folded in). Variant 0 (demo-a): a model served on GPUs 0-1 beside a torchrun-like
    launcher's two ranks, a ghost and an idle notebook kernel on GPU 2, a service that ignores
    SIGTERM, a zombie's parent and a job stopped by Ctrl+Z on GPU 3. Variant 1 (demo-b): a training
    on GPUs 0-1, a data-loader family (three workers holding their parent's context) and an idle
    kernel on GPU 0, a ghost, a zombie's parent and a supervisor's worker on GPU 2, and GPU 3 free
    (DEMO_BENCH_GPU), as every GPU past it (demo-b has 8: SCENARIO_GPUS).
    Every job on demo-a ends for good when cleaned (the README's `clean && wait` rehearsal); demo-b's
    supervisor starts a new worker SUPERVISOR_RESTART_S after one ends. Fewer than 4 GPUs: the jobs
    share them."""

    def on(*indexes):
        # type: (*int) -> List[int]
        return _on(gpus, *indexes)

    if variant % 2 == 0:
        return [
            ("busy", dict(gpu=on(0, 1), memory=118 * GiB, util=93, name="vllm_serve.py",
                          argv=["--model", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "2",
                                "--port", "8000"])),
            ("ghost", dict(gpu=on(2), memory=41 * GiB, name="train.py",
                           argv=["--model", "llama-3.1-8b", "--epochs", "3", "--num-workers", "4"])),
            ("idle", dict(gpu=on(2), memory=12 * GiB, name="notebook_kernel.py",
                          argv=["-f", "/run/user/1000/jupyter/kernel-4f1c.json"])),
            ("ignore-term", dict(gpu=on(3), memory=30 * GiB, util=38, name="serve_embed.py",
                                 argv=["--model", "BAAI/bge-large-en-v1.5", "--port", "9000"])),
            ("zombie", dict(gpu=on(3), memory=22 * GiB, util=97, name="bench.py",
                            argv=["--suite", "matmul", "--dtype", "bf16"])),
            ("launcher", dict(gpu=on(0, 1), memory=12 * GiB, util=91, name="torchrun",
                              argv=["--nproc-per-node", "2", "train.py", "--config", "llama-8b.yaml"],
                              child={"name": "train.py", "argv": ["--local-rank", "{rank}", "--config",
                                                                  "llama-8b.yaml"]})),
            ("stopped", dict(gpu=on(3), memory=8 * GiB, name="sweep.py", argv=["--trial", "7", "--lr", "1e-4"])),
            ("hidden", dict(name="probe_cuda.py", argv=["--check", "all"])),
            ("monitor", dict(name="nv_hostengine.py", argv=["-n", "--service-account", "nvidia-dcgm"])),
        ]  # fmt: skip
    return [
        ("busy", dict(gpu=on(0, 1), memory=104 * GiB, util=98, name="train.py",
                      argv=["--model", "mixtral-8x7b", "--fsdp", "--batch-size", "8"])),
        ("idle", dict(gpu=on(0), memory=9 * GiB, name="notebook_kernel.py",
                      argv=["-f", "/run/user/1001/jupyter/kernel-93ab.json"])),
        ("ignore-term", dict(gpu=on(1), memory=20 * GiB, util=35, name="vllm_serve.py",
                             argv=["--model", "Qwen/Qwen2.5-7B-Instruct", "--port", "8001"])),
        ("ghost", dict(gpu=on(2), memory=63 * GiB, name="finetune.py",
                       argv=["--model", "qwen2.5-32b", "--lora", "--num-workers", "2"])),
        ("zombie", dict(gpu=on(2), memory=16 * GiB, util=88, name="bench.py",
                        argv=["--suite", "attention", "--seq-len", "8192"])),
        ("workers", dict(gpu=on(0), memory=10 * GiB, util=82, name="pretrain.py", workers=3,
                         argv=["--data", "/data/c4", "--num-workers", "3"])),
        ("supervisor", dict(gpu=on(2), memory=6 * GiB, util=30, name="supervisor.py",
                            argv=["--program", "embedder", "--autorestart", "true"],
                            child={"name": "embed_worker.py", "argv": ["--queue", "embeddings"],
                                   "restart_s": SUPERVISOR_RESTART_S})),
        ("hidden", dict(name="probe_cuda.py", argv=["--device", "all", "--loop"])),
        ("monitor", dict(name="nv_hostengine.py", argv=["-n", "--service-account", "nvidia-dcgm"])),
    ]  # fmt: skip


def workers_jobs(variant, gpus):
    # type: (int, int) -> JobSpecs
    """A launcher on GPU 0 with three data-loader workers in its process group, another user's job
    sharing GPU 0, and a job on GPU 1: what a kill of one worker, or of GPU 0, must tell apart."""
    return [
        ("workers", dict(gpu=[0], memory=24 * GiB, util=90, name="launch.py", workers=3,
                         argv=["--nproc", "1", "--num-workers", "3"])),
        ("busy", dict(gpu=[0], memory=8 * GiB, util=40, name="serve.py", argv=["--port", "8000"])),
        ("busy", dict(gpu=[1 % gpus], memory=16 * GiB, util=70, name="train.py", argv=["--lr", "3e-4"])),
    ]  # fmt: skip


def preflight_state(gpus):
    # type: (int) -> Dict[int, Dict[str, Any]]
    """The "preflight" scenario: four GPUs that are each not ready in their own way. GPU 0 is ready;
    GPU 1 has 2.1 GiB that no process holds (orphaned: only a reset frees it); GPU 2 ran hot and cools
    slowly (78 °C, falling 0.5 °C a second) while throttling; GPU 3 has persistence mode off and ECC
    errors (1 uncorrected, a row remap pending)."""
    state = {  # type: Dict[int, Dict[str, Any]]
        1: {"orphaned": int(2.1 * GiB)},
        2: {"cooling": {"from": 78.0, "rate": 0.5, "since": time.time()}, "throttle": ["hw-thermal"]},
        3: {"persistence": False, "ecc_corrected": 4, "ecc_uncorrected": 1, "remap_pending": True},
    }
    return {i: dict(knobs) for i, knobs in state.items() if i < gpus}


# The "mig" scenario's GPU 0: three GPU instances of an H200 (3g.71gb, 2g.35gb, 1g.18gb).
MIG_LAYOUT = (
    {"gi": 1, "ci": 0, "memory_total": 71 * GiB, "name": MIG_NAME % (3, 71)},
    {"gi": 2, "ci": 0, "memory_total": 35 * GiB, "name": MIG_NAME % (2, 35)},
    {"gi": 5, "ci": 0, "memory_total": 18 * GiB, "name": MIG_NAME % (1, 18)},
)


def mig_state(gpus):
    # type: (int) -> Dict[int, Dict[str, Any]]
    """The "mig" scenario: GPU 0 in MIG mode with three instances (MIG_LAYOUT); the rest whole."""
    return {0: {"mig_instances": [dict(i) for i in MIG_LAYOUT]}}


def mig_jobs(variant, gpus):
    # type: (int, int) -> JobSpecs
    """Jobs in two of GPU 0's MIG instances (two in 1.0, one in 2.0; 5.0 is free), and one on
    GPU 1 (not in MIG mode) when there is one."""
    jobs = [
        ("busy", dict(gpu=[0], memory=40 * GiB, util=80, name="train.py", argv=["--model", "llama-3.1-8b"],
                      mig=(1, 0))),
        ("idle", dict(gpu=[0], memory=6 * GiB, name="notebook_kernel.py", argv=["-f", "kernel-mig.json"],
                      mig=(1, 0))),
        ("busy", dict(gpu=[0], memory=20 * GiB, util=60, name="serve.py", argv=["--port", "8000"],
                      mig=(2, 0))),
    ]  # fmt: skip
    if gpus > 1:
        jobs.append(
            ("busy", dict(gpu=[1], memory=30 * GiB, util=90, name="bench.py", argv=["--suite", "gemm"]))
        )
    return jobs


def mps_jobs(variant, gpus):
    # type: (int, int) -> JobSpecs
    """CUDA MPS on GPU 0: the control daemon, the server (its own context) and three clients whose
    work runs in the server's contexts (NVML lists them through its MPS process list)."""
    return [
        ("mps-control", dict(argv=["-d"])),
        ("mps-server", dict(gpu=[0], memory=512 << 20, util=0)),
        ("mps-client", dict(gpu=[0], memory=10 * GiB, util=60, name="infer.py", argv=["--rank", "0"])),
        ("mps-client", dict(gpu=[0], memory=10 * GiB, util=55, name="infer.py", argv=["--rank", "1"])),
        ("mps-client", dict(gpu=[0], memory=6 * GiB, util=30, name="embed.py", argv=["--batch", "64"])),
    ]


def jobs_jobs(variant, gpus):
    # type: (int, int) -> JobSpecs
    """The "jobs" scenario: what people stop by name (docs/PROTOCOL.md "Jobs"). A torchrun-like
    launcher holding no device file, with two ranks on GPUs 0 and 1; a supervisor that restarts its
    worker on GPU 2 half a second after it ends; one user's two jobs on GPUs 3 and 4 (8 GPUs by
    default: with fewer, the indexes wrap round, as in the demo)."""

    def on(*indexes):
        # type: (*int) -> List[int]
        return _on(gpus, *indexes)

    return [
        ("launcher", dict(gpu=[0 % gpus, 1 % gpus], memory=18 * GiB, util=92, name="torchrun",
                          argv=["--nproc-per-node", "2", "train.py", "--config", "llama-8b.yaml"],
                          child={"name": "train.py", "argv": ["--local-rank", "{rank}", "--config",
                                                              "llama-8b.yaml"]})),
        ("supervisor", dict(gpu=on(2), memory=6 * GiB, util=30, name="supervisor.py",
                            argv=["--program", "worker", "--autorestart", "true"],
                            child={"name": "worker.py", "argv": ["--queue", "embeddings"]})),
        ("busy", dict(gpu=on(3), memory=24 * GiB, util=88, name="train.py", argv=["--model", "qwen2.5-7b"])),
        ("busy", dict(gpu=on(4), memory=10 * GiB, util=45, name="eval.py", argv=["--suite", "mmlu"])),
    ]  # fmt: skip


def neighbour_jobs(variant, gpus):
    # type: (int, int) -> JobSpecs
    """The "neighbour" scenario: seen from inside an LXC guest (the reader plays one). This guest's
    own `train.py` on GPU 0 and `serve.py` on GPU 2; other guests' jobs use 4.6 GiB of GPU 1 and
    30 GiB of GPU 2 that NVML here lists for nobody (`outside`); GPU 3 is free."""

    def on(*indexes):
        # type: (*int) -> List[int]
        return _on(gpus, *indexes)

    return [
        ("busy", dict(gpu=on(0), memory=20 * GiB, util=80, name="train.py", argv=["--model", "llama-3.1-8b"])),
        ("neighbour", dict(gpu=on(1), memory=int(4.6 * GiB), util=35, name="train.py",
                           argv=["--guest", "131"])),
        ("busy", dict(gpu=on(2), memory=12 * GiB, util=40, name="serve.py", argv=["--port", "8000"])),
        ("neighbour", dict(gpu=on(2), memory=30 * GiB, util=50, name="vllm_serve.py",
                           argv=["--guest", "132"])),
    ]  # fmt: skip


def kubepods_jobs(variant, gpus):
    # type: (int, int) -> JobSpecs
    """The "kubepods" scenario: the sim plays a Kubernetes node (readers/sim/pods.py). A training in
    pod ml-team/llama-train-0 on GPUs 0-1 (systemd cgroup driver, cgroup v2, containerd), a notebook
    in pod notebooks/jupyter-alice on GPU 2 (cgroupfs driver, cgroup v1), and a benchmark on the
    node itself, in no pod, on GPU 3."""

    def on(*indexes):
        # type: (*int) -> List[int]
        return _on(gpus, *indexes)

    return [
        ("busy", dict(gpu=on(0, 1), memory=40 * GiB, util=90, name="train.py", argv=["--model", "llama-3.1-8b"],
                      pod={"namespace": "ml-team", "name": "llama-train-0", "container": "trainer",
                           "uid": "6f1c2a4e-93b0-4d5f-8a7e-2b9c0d1e3f47", "qos": "burstable"})),
        ("idle", dict(gpu=on(2), memory=8 * GiB, name="notebook_kernel.py", argv=["-f", "kernel-7a1b.json"],
                      pod={"namespace": "notebooks", "name": "jupyter-alice", "container": "notebook",
                           "uid": "0b7d9e21-5c4a-4f36-9e8d-71a2b3c4d5e6", "qos": "besteffort",
                           "driver": "cgroupfs"})),
        ("busy", dict(gpu=on(3), memory=12 * GiB, util=50, name="bench.py", argv=["--suite", "gemm"])),
    ]  # fmt: skip


# Every scenario, in the order people see them listed: its name and the jobs it starts.
SCENARIO_JOBS = {
    "demo": demo_jobs,
    "empty": no_jobs,
    "workers": workers_jobs,
    "preflight": no_jobs,
    "mig": mig_jobs,
    "mps": mps_jobs,
    "jobs": jobs_jobs,
    "neighbour": neighbour_jobs,
    "kubepods": kubepods_jobs,
}  # type: Dict[str, Callable[[int, int], JobSpecs]]
# The driver state a scenario sets before its jobs start, by GPU index (SimReader.set_state's knobs).
SCENARIO_STATE = {
    "preflight": preflight_state,
    "mig": mig_state,
}  # type: Dict[str, Callable[[int], Dict[int, Dict[str, Any]]]]
# The names a config and the probe's --sim-scenario accept: exactly the scenarios that say what they run.
SCENARIOS = tuple(SCENARIO_JOBS)
