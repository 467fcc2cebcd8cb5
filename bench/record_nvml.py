#!/usr/bin/env python3
"""Record what NVML answers on this machine, for tests/probe/test_nvml_reader.py.

Run on a GPU host (optionally with a CUDA job running): prints JSON with every value NvmlReader reads,
so the reader's conversion can be tested against a real sample on machines without a GPU.
"""

import json
import sys
from pathlib import Path

import pynvml as nv


def call(fn, *args):
    try:
        return fn(*args)
    except nv.NVMLError as exc:
        return {"nvml_error": int(getattr(exc, "value", -1))}


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def procs(fn, h):
    out = call(fn, h)
    if isinstance(out, dict):
        return out
    return [{"pid": p.pid, "usedGpuMemory": p.usedGpuMemory} for p in out]


def main():
    job = None
    if len(sys.argv) > 1:  # GiB: record with a CUDA job holding that much on GPU 0
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.support.cudajob import CudaJob

        job = CudaJob(float(sys.argv[1]))
    try:
        record()
    finally:
        if job is not None:
            job.stop()


def record():
    nv.nvmlInit()
    gpus = []
    for i in range(nv.nvmlDeviceGetCount()):
        h = nv.nvmlDeviceGetHandleByIndex(i)
        v2 = call(nv.nvmlDeviceGetMemoryInfo, h, nv.nvmlMemory_v2)
        v1 = call(nv.nvmlDeviceGetMemoryInfo, h)
        util = call(nv.nvmlDeviceGetUtilizationRates, h)
        gpus.append(
            {
                "name": text(call(nv.nvmlDeviceGetName, h)),
                "uuid": text(call(nv.nvmlDeviceGetUUID, h)),
                "minor": call(nv.nvmlDeviceGetMinorNumber, h),
                "memory_v2": v2
                if isinstance(v2, dict)
                else {"total": v2.total, "used": v2.used, "reserved": v2.reserved, "free": v2.free},
                "memory_v1": v1
                if isinstance(v1, dict)
                else {"total": v1.total, "used": v1.used, "free": v1.free},
                "util": util if isinstance(util, dict) else {"gpu": util.gpu, "memory": util.memory},
                "temperature": call(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
                "power": call(nv.nvmlDeviceGetPowerUsage, h),
                "power_limit": call(nv.nvmlDeviceGetEnforcedPowerLimit, h),
                "persistence": call(nv.nvmlDeviceGetPersistenceMode, h),
                "compute": procs(nv.nvmlDeviceGetComputeRunningProcesses, h),
                "graphics": procs(nv.nvmlDeviceGetGraphicsRunningProcesses, h),
                "mps": procs(nv.nvmlDeviceGetMPSComputeRunningProcesses, h),
            }
        )
    json.dump(
        {
            "driver": text(nv.nvmlSystemGetDriverVersion()),
            "nvml": text(nv.nvmlSystemGetNVMLVersion()),
            "cuda": nv.nvmlSystemGetCudaDriverVersion(),
            "gpus": gpus,
        },
        sys.stdout,
        indent=1,
    )


if __name__ == "__main__":
    main()
