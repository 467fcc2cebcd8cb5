"""`python -m gputui.probe`: the probe on this host (see main.py)."""

import os
import sys

from .main import main

code = main()
sys.stderr.flush()
# The stdin thread may sit in a blocking read; interpreter shutdown would wait on its lock.
os._exit(code)
