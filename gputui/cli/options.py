"""The options several commands share, each defined once: the hosts (HOST, --demo, --config),
--idle-minutes, --timeout, --interval, --log and --connections, the filters (--user, --pid, --gpu/--only,
--compute), --ascii; and what the shared ones mean (`idle_after`, `filter_text`).

Light on purpose: a command builds its parser from these before the probe's head start
(gputui/cli/main.py), so nothing here may import the fleet, the transport or asyncio.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from ..config.file import Config
from ..config.file import idle_threshold as threshold
from ..model.textsafe import printable
from ..views.filter import FilterError, parse
from . import argtypes, streams
from .demo import demo_names

# `--demo` without [idle] in the config or --idle-minutes: its notebook kernels hold memory at 0 % SM
# from the start, and a demo should show an idle holder within a minute, not ten.
DEMO_IDLE_MINUTES = 1.0
HOST_HELP = "local, a config name, alias, user@host[:port]"


def add_hosts(p: argparse.ArgumentParser) -> None:
    """HOST..., --demo and --config: which hosts a command watches."""
    p.add_argument("hosts", nargs="*", metavar="HOST", help=HOST_HELP)
    p.add_argument("--demo", action="store_true", help="a simulated cluster: real processes, no GPU needed")
    add_config(p)


def add_hub(p: argparse.ArgumentParser) -> None:
    """--hub URL and --hub-token-file: the hosts of a hub (`gputui serve`), read from its stream."""
    p.add_argument(
        "--hub",
        metavar="URL",
        help="the hosts of a hub (gputui serve at URL, http:// or https://), read from it: no SSH from "
        "here; read-only unless the hub allows this token to act",
    )
    p.add_argument(
        "--hub-token-file",
        metavar="FILE",
        help="the hub's token: the first line of FILE (else $GPUTUI_HUB_TOKEN). Never on the command "
        "line: every user of the machine can read a command line (ps, /proc)",
    )


def add_connections(p: argparse.ArgumentParser, default: int, held: str) -> None:
    """--connections N: what a command's HTTP server holds at once (`held`, said with N), the next
    one answered 503 rather than queued."""
    add_count(
        p, "--connections", 65536, "a number of connections", default, f"{held}; one more is answered 503"
    )


def add_count(p: argparse.ArgumentParser, flag: str, most: int, what: str, default: int, help: str) -> None:
    """FLAG N: a whole number from 1 to `most` (`what` names it in the error), `default` said in the help."""
    p.add_argument(
        flag,
        type=argtypes.whole(1, most, what),
        default=default,
        metavar="N",
        help=f"{help} (default {default})",
    )


def flag(p: argparse.ArgumentParser, *names: str, help: str) -> None:
    """An option that takes no value: on where given."""
    p.add_argument(*names, action="store_true", help=help)


def add_gpus(p: argparse.ArgumentParser, help: str) -> None:
    """--gpu SPEC, repeated: the GPUs a command acts on or waits for, each as gpuspec.py resolves it
    (an index, a UUID, HOST:INDEX, HOST:all)."""
    p.add_argument("--gpu", action="append", metavar="SPEC", help=help)


def add_json(p: argparse.ArgumentParser, version: int) -> None:
    """--json: the command's one document on stdout, of this version (gputui/cli/versions.py)."""
    flag(p, "--json", help=f"print one JSON document (version {version})")


def add_config(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config", metavar="PATH", help="TOML config (default: $GPUTUI_CONFIG, then the user dir)"
    )


class _AsciiAction(argparse.Action):
    """--ascii: ASCII mode from the moment argparse reads it (streams.output_mode says the rest)."""

    def __call__(
        self, p: argparse.ArgumentParser, ns: argparse.Namespace, values: object, *_: object
    ) -> None:
        streams.use_ascii()
        setattr(ns, self.dest, True)


def add_ascii(p: argparse.ArgumentParser) -> None:
    """--ascii, on every command that writes for a person: the dashboard's glyph table for its text."""
    p.add_argument(
        streams.ASCII_OPTION,
        action=_AsciiAction,
        nargs=0,
        default=False,
        help="write ASCII only (each block, box line or mark as one ASCII character); automatic where "
        "the locale is not UTF-8 (LANG=C)",
    )


def add_idle_minutes(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--idle-minutes",
        type=argtypes.minutes,
        default=None,
        metavar="M",
        help="a process holding GPU memory at 0%% SM this long is an idle holder (default: [idle] "
        "minutes in the config, else 10; 1 with --demo)",
    )


def add_timeout(p: argparse.ArgumentParser, help: str = "wait this long for each host") -> None:
    p.add_argument("--timeout", type=argtypes.seconds, default=20.0, metavar="S", help=help)


def add_interval(p: argparse.ArgumentParser, default: float | None, help: str) -> None:
    """The sample interval (the protocol's bounds, as the probe and the config check them)."""
    p.add_argument("--interval", type=argtypes.interval, default=default, metavar="S", help=help)


def add_memory_below(p: argparse.ArgumentParser) -> None:
    """A GPU's condition for `wait` and `pick`: less memory used than SIZE."""
    p.add_argument(
        "--memory-below", type=argtypes.size, metavar="SIZE", help="also: used memory below SIZE (8GiB)"
    )


def add_log(p: argparse.ArgumentParser, help: str) -> None:
    """--log PATH, checked here for every command (argtypes.audit_log): a bad one is a usage error."""
    p.add_argument("--log", type=argtypes.audit_log, metavar="PATH", help=help)


def idle_after(args: argparse.Namespace, config: Config) -> float:
    """Seconds at 0 % SM that make an idle holder: --idle-minutes, the config's [idle] minutes, 1 for
    the demo, else the default (gputui/fleet/idle.py)."""
    minutes = getattr(args, "idle_minutes", None) or config.idle_minutes
    if minutes is None and getattr(args, "demo", False):
        minutes = DEMO_IDLE_MINUTES
    return threshold(minutes)


# -- the filters: nvitop's --user, --pid, --only and --compute, as terms of the filter language -------

# A character no user name holds, and that the filter language would read as something else.
_NOT_IN_A_NAME = frozenset(" \"'")
COMPUTE_TERM = "kind:user"  # NVML lists it on a GPU, with memory there: it holds a GPU context


def _listed(what: str, check: Callable[[str], bool]) -> Callable[[str], list[str]]:
    """An argparse type: a comma list of values `check` accepts (each option may be repeated)."""

    def parse_list(text: str) -> list[str]:
        items = text.split(",")
        if not all(items) or not all(check(item) for item in items):
            raise argparse.ArgumentTypeError(f"{argtypes.shown(text)} is not {what}")
        return items

    return parse_list


def _one_term(item: str) -> bool:
    """No space or quote: the filter language would read `item` as more terms, or a quoted one."""
    return item.isprintable() and not any(c in _NOT_IN_A_NAME or c.isspace() for c in item)


def _term(field: str, item: str) -> bool:
    """`item` as the filter language takes a value of `field` (one rule for the box and the CLI)."""
    if not _one_term(item):
        return False
    try:
        parse(f"{field}:{item}")
    except FilterError:
        return False
    return True


def _user(item: str) -> bool:
    """A user name, or a uid (a number below 2**32 - 1)."""
    return _term("user", item)


def _pid(item: str) -> bool:
    number = argtypes.parse_index(item)
    return number is not None and 0 < number < 10**9  # the filter language's bound: 9 digits


def _gpu(item: str) -> bool:
    return _term("gpu", item)


USERS = _listed("a user name or uid (or a comma list of them: alice,bob,1000)", _user)
PIDS = _listed("a PID (or a comma list of them: 4121,4122)", _pid)
GPUS = _listed("a GPU: an index, a UUID, HOST:INDEX or HOST:all (or a comma list of them: 2,3)", _gpu)


def add_filters(p: argparse.ArgumentParser) -> None:
    """--user, --pid, --gpu (--only) and --compute: what is shown, as the filter box would show it."""
    group = p.add_argument_group(
        "filters",
        "show only what matches (all of these; a list: any of it), as the filter box (/) reads "
        "`user:alice,bob pid:4121 gpu:2,3 kind:user`",
    )
    group.add_argument(
        "--user",
        type=USERS,
        action="extend",
        metavar="NAME",
        help="processes of this user, a name or a uid (repeat it, or alice,bob; wildcards: 'a*'), "
        "and the GPUs they use",
    )
    group.add_argument(
        "--pid", type=PIDS, action="extend", metavar="PID", help="these processes (repeat it, or 4121,4122)"
    )
    group.add_argument(
        "--gpu",
        "--only",
        dest="gpu",
        type=GPUS,
        action="extend",
        metavar="SPEC",
        help="these GPUs and the processes on them: an index, a UUID, HOST:INDEX or HOST:all, as "
        "clean --gpu takes them (repeat it, or 2,3; --only is nvitop's name for it); a positional "
        "HOST:N is one too",
    )
    group.add_argument(
        "--compute",
        action="store_true",
        help="processes with a GPU context (NVML lists them on a GPU: no monitor, device-file "
        "holder, ghost or zombie), and the GPUs they run on",
    )


def filter_text(args: argparse.Namespace) -> str:
    """The filters of `args` as the filter language writes them ("" for none): the one query the
    snapshot prints by and the dashboard starts with, in its filter box."""
    terms = []
    for field, values in (("user", args.user), ("pid", args.pid), ("gpu", args.gpu)):
        if values:
            terms.append(f"{field}:{','.join(dict.fromkeys(values))}")
    if args.compute:
        terms.append(COMPUTE_TERM)
    return " ".join(terms)


def filter_words(args: argparse.Namespace) -> str:
    """The filter options as typed (`--user alice --gpu 2`): what a message names."""
    words = [
        f"--{field} {printable(','.join(getattr(args, field)))}"
        for field in ("user", "pid", "gpu")
        if getattr(args, field)
    ]
    return " ".join([*words, *(["--compute"] if args.compute else [])])


def unknown_gpu_host(args: argparse.Namespace, hosts: list[str]) -> str | None:
    """A --gpu HOST:INDEX whose HOST is none of `hosts` (it names nothing: a typo), as its error says
    it (not escaped: `streams.fail` escapes what it prints)."""
    for spec in args.gpu or ():
        host, sep, _ = spec.rpartition(":")
        if sep and not any(c in host for c in "*?[") and host.casefold() not in {h.casefold() for h in hosts}:
            return f"--gpu {spec}: {host} is not one of the hosts ({', '.join(hosts)})"
    return None


def demo_gpu_problem(args: argparse.Namespace) -> str | None:
    """unknown_gpu_host for --demo, said before the demo is started for nothing: its hosts are known
    without it (those named, when each is one of its own, else all of them)."""
    if not args.demo or getattr(args, "hub", None):
        return None
    names = demo_names()
    if args.hosts and not set(args.hosts) <= set(names):
        return None  # the demo's own words on them come from resolve_hosts
    return unknown_gpu_host(args, list(args.hosts) or names)
