"""GPU tests: real NVML, real CUDA jobs (PyTorch). Skipped where there is no NVIDIA driver."""

import os

import pytest

from tests.support.cudajob import CudaJob


def _have_gpu() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        pynvml.nvmlShutdown()
        return count > 0
    except Exception:
        return False


HAVE_GPU = _have_gpu()


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/gpu/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.gpu)
            if not HAVE_GPU:
                item.add_marker(pytest.mark.skip(reason="no NVIDIA driver or GPU here"))


@pytest.fixture
def cuda_job():
    jobs = []

    def start(**kw):
        job = CudaJob(**kw)
        jobs.append(job)
        return job

    yield start
    for job in jobs:
        job.stop()
