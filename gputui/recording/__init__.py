"""What `gputui record` writes and `--replay` reads: format (the file, its checkpoints and readers),
player (recorded hosts replayed as links, with seeking) and playback (a recording played as a live
probe's stream, for the benches and the pacing tests). Importers name the module they use.
"""
