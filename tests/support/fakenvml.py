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


class Handle(int):
    """A GPU's handle. pynvml's are ctypes pointers, which cannot be hashed: so neither can this one,
    and a reader that keys anything by a handle fails here as it would on a real GPU. It is still
    its GPU's index for the fakes (a list index, compared by value)."""

    __hash__ = None  # type: ignore[assignment]


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
            if int(handle) in lost:
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
    nv.nvmlDeviceGetHandleByIndex = Handle
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


class UtilBuffer:
    """The driver's per-process utilization samples, as nvmlDeviceGetProcessUtilization keeps and
    returns them: each sample stamped with CPU time in microseconds since the epoch; a query returns
    the GPU's samples newer than lastSeenTimeStamp (0: the whole buffer), NOT_FOUND when there is
    none. `asked` records each query's (GPU, lastSeenTimeStamp)."""

    NOT_FOUND = 6

    def __init__(self):
        self.samples = {}  # GPU index -> [sample]
        self.asked = []

    def add(self, gpu, pid, at, sm, mem=0, enc=0, dec=0):
        """A sample of `pid` on `gpu` at Unix time `at` (seconds)."""
        stamp = int(at * 1e6)
        sample = types.SimpleNamespace(
            pid=pid, timeStamp=stamp, smUtil=sm, memUtil=mem, encUtil=enc, decUtil=dec
        )
        self.samples.setdefault(gpu, []).append(sample)

    def query(self, handle, last_seen):
        self.asked.append((int(handle), last_seen))
        newer = [s for s in self.samples.get(int(handle), []) if s.timeStamp > last_seen]
        if not newer:
            raise NVMLError(self.NOT_FOUND)
        return newer

    def install(self, nv):
        nv.NVML_ERROR_NOT_FOUND = self.NOT_FOUND
        nv.nvmlDeviceGetProcessUtilization = self.query
        return self
