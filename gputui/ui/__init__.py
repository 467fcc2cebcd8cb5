"""The Textual app (see app.py). `make_app(fleet)` (factory.py) builds it."""

from .app import GpuTuiApp
from .factory import make_app

__all__ = ["GpuTuiApp", "make_app"]
