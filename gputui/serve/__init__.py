"""The hub: one fleet served over HTTP (docs/SERVE.md), beside the dashboard (gputui/ui) as the
other front end over the fleet and its views.

  app.py      the aiohttp application: routes, security headers, tokens, bounded requests
  listen.py   aiohttp's runner with the bounds on clients: a whole request in 5 s, quiet notices
  stream.py   the fan-out: each change made into a frame once, a shared bounded log, one cursor a client
  frames.py   the frames' bytes and the JSON each carries
  metrics.py  /metrics, each host's text kept until it changes
  tokens.py   the tokens file: names, roles, SHA-256 digests
  page/       the web page's files, served as they are
"""
