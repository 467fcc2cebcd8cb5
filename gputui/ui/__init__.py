"""The Textual app (see app.py). `make_app(fleet)` builds it."""

from .app import GpuTuiApp, make_app

__all__ = ["GpuTuiApp", "make_app"]
