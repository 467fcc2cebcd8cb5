"""`python -m gputui`: the same as the `gputui` command."""

import sys

from .cli import main

sys.exit(main())
