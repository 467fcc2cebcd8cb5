"""Where the config file is looked for, as far as it can be said without importing anything: the
variable that names one, and the default path by platformdirs' rule on Linux (file.py asks
platformdirs itself, `default_config_path`; this is for cli/entry.py's guess, made before the config
module is imported)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

ENV_CONFIG = "GPUTUI_CONFIG"


def may_have_config(environ: Mapping[str, str]) -> bool:
    """False only where surely no config applies: $GPUTUI_CONFIG unset and no
    `$XDG_CONFIG_HOME/gputui/config.toml` (`~/.config/...`). Anywhere but Linux: True (no guess)."""
    if environ.get(ENV_CONFIG) or not sys.platform.startswith("linux"):
        return True
    base = environ.get("XDG_CONFIG_HOME", "").strip() or os.path.expanduser("~/.config")
    return os.path.exists(os.path.join(base, "gputui", "config.toml"))
