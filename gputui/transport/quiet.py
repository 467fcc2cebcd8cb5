"""A dependency's warnings are not the user's to read: asyncssh (2.24) names cryptography's DSA
classes as it loads and whenever it handles a DSA key, and cryptography (>= 48 or so) warns at each
of those with CryptographyDeprecationWarning, ten lines on stderr at the first SSH host of any
command. `quiet_asyncssh_warnings` ignores that one class of warning where asyncssh's own modules
cause it, and nothing else: gputui's warnings, and that class from any other module, still show.

A filter rather than a pin: asyncssh and cryptography move on their own (a `cryptography<N` pin
would fight every other package of the environment that needs a newer one), and the filter is right
for any pair of versions."""

from __future__ import annotations

import warnings

from cryptography.utils import CryptographyDeprecationWarning

ASYNCSSH_MODULES = r"asyncssh(\.|$)"  # the modules a warning is counted against: asyncssh's own


def quiet_asyncssh_warnings() -> None:
    """Ignore CryptographyDeprecationWarning raised on asyncssh's behalf, for the process (it also
    comes later, when a DSA key is read). Idempotent: warnings.filterwarnings adds a filter once."""
    warnings.filterwarnings("ignore", category=CryptographyDeprecationWarning, module=ASYNCSSH_MODULES)
