"""Hosts from where they are already listed: hostlist expressions, files, ~/.ssh/config, Slurm,
Ansible and the config's named groups (docs/FLEET.md).

`specs.host_specs(words, config)` turns command-line host specs into HostSpecs; `sources.Resolver`
lists them as ResolvedHosts (`gputui hosts`). Submodules are imported where used: config/file.py imports
`hostlist` and `base` (stdlib only) to check its [groups] table, and `sources` imports config.
"""
