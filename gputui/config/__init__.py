"""What the user configured: file (the config file and host specs), hostlist (host names and
expressions), killoptions (the signals and timeouts of a kill) and ownership (who may write a file
gputui trusts with what to run). Importers name the module they use.
"""
