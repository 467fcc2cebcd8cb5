"""A `pynvml` stand-in that answers from values recorded on a real 2 x H200 machine
(bench/record_nvml.py, tests/fixtures/nvml_*.json), so the NVML reader runs without a GPU; a GPU can
be made to fail as one that fell off the bus."""

import json
import types

from tests.support.paths import FIXTURES


class NVMLError(Exception):
    def __init__(self, value):
        super().__init__(f"NVML error {value}")
        self.value = value


def fake_pynvml(recording, init_error=None, lost=()):
    """A pynvml stand-in that answers from a recording; GPUs in `lost` fail like a fallen-off GPU."""
    nv = types.SimpleNamespace(
        NVMLError=NVMLError,
        NVML_ERROR_LIBRARY_NOT_FOUND=12,
        NVML_ERROR_DRIVER_NOT_LOADED=9,
        NVML_ERROR_NO_PERMISSION=4,
        NVML_ERROR_GPU_IS_LOST=15,
        NVML_ERROR_NOT_SUPPORTED=3,
        NVML_TEMPERATURE_GPU=0,
        nvmlMemory_v2=0x2000028,
    )
    gpus = recording["gpus"]

    def init():
        if init_error is not None:
            raise NVMLError(init_error)

    def answer(key, wrap=None):
        def fn(handle, *args):
            if handle in lost:
                raise NVMLError(15)
            value = gpus[handle][key]
            if isinstance(value, dict) and "nvml_error" in value:
                raise NVMLError(value["nvml_error"])
            return wrap(value) if wrap else value

        return fn

    def ns(d):
        return types.SimpleNamespace(**d)

    def memory(handle, version=None):
        return answer("memory_v2" if version else "memory_v1", ns)(handle)

    def procs(key):
        return answer(key, lambda rows: [ns(r) for r in rows])

    nv.nvmlInit = init
    nv.nvmlShutdown = lambda: None
    nv.nvmlDeviceGetCount = lambda: len(gpus)
    nv.nvmlDeviceGetHandleByIndex = lambda i: i
    nv.nvmlSystemGetDriverVersion = lambda: recording["driver"]
    nv.nvmlSystemGetNVMLVersion = lambda: recording["nvml"]
    nv.nvmlSystemGetCudaDriverVersion = lambda: recording["cuda"]
    nv.nvmlDeviceGetName = answer("name")
    nv.nvmlDeviceGetUUID = answer("uuid")
    nv.nvmlDeviceGetMinorNumber = answer("minor")
    nv.nvmlDeviceGetMemoryInfo = memory
    nv.nvmlDeviceGetUtilizationRates = answer("util", ns)
    nv.nvmlDeviceGetTemperature = lambda h, sensor: answer("temperature")(h)
    nv.nvmlDeviceGetPowerUsage = answer("power")
    nv.nvmlDeviceGetEnforcedPowerLimit = answer("power_limit")
    nv.nvmlDeviceGetPersistenceMode = answer("persistence")
    nv.nvmlDeviceGetComputeRunningProcesses = procs("compute")
    nv.nvmlDeviceGetGraphicsRunningProcesses = procs("graphics")
    nv.nvmlDeviceGetMPSComputeRunningProcesses = procs("mps")
    return nv


def load(name):
    """A recording of NVML's answers from tests/fixtures (bench/record_nvml.py wrote them)."""
    return json.loads((FIXTURES / name).read_text())
