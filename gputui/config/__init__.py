"""What the user configured: file (the config file and host specs), hostlist (host names and
expressions, and the one rule a host name follows), killoptions (the signals and timeouts of a kill),
ownership (who may write a file gputui trusts with what to run) and userfile (a file the user names,
read only where it is a regular file, within a bound). Importers name the module they use.
"""
