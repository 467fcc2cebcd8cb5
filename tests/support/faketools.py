"""A command-line tool the test writes (kubectl, scontrol, squeue, ansible-inventory...): a small
Python script on a PATH of the test's own, so a source runs it as it runs the real one."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path


def fake(bin_dir: Path, name: str, body: str) -> Path:
    """An executable `name` in bin_dir: Python, `body` after `import json, os, sys, time`."""
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\nimport json, os, sys, time\n{textwrap.dedent(body)}")
    path.chmod(0o755)
    return path
