"""The version of each command's JSON document, defined once: the documents carry it, the commands'
--help says it, and scripts check it (README "JSON")."""

CLEAN_JSON = 2  # `gputui clean --json`, --reset-gpu's included
WAIT_JSON = 1  # `gputui wait --json`
PICK_JSON = 1  # `gputui pick --format json`
