"""The host list: from the command line (ssh-style arguments) and from a TOML config file.

A bad config is a `ConfigError` that names the file, the line and what to fix; the CLI prints it and
exits 2. Nothing here touches the network or the terminal.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..probe.common import DEFAULT_SIGNALS, MAX_TIMEOUT, SIGNAL_PLANS, TERM_TIMEOUT, VERIFY_TIMEOUT
from . import userfile
from .hostlist import (
    MAX_HOSTS,
    SOURCES,
    UNSAFE_WORDS,
    HostlistError,
    is_hostlist,
    quoted,
    size,
    unsafe_characters,
    word_problem,
)
from .killoptions import KillOptions
from .location import ENV_CONFIG
from .ownership import UNTRUSTED, ownership_problem

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, as a package (tomli)
    import tomli as tomllib

from ..probe.readers.scenarios import SCENARIOS
from ..probe.wire import interval_problem

LOCAL = "local"
# Said where a user, a port or a jump host is written with `local` (`alice@local`, `local:2222`, a
# [[hosts]] entry): dropped, the operator would believe this machine was reached as that user, or
# through that jump host, or another machine was.
LOCAL_ALONE = (
    "`local` is this machine, read without SSH: a user, port or jump host does not apply (name the "
    "machine by its address to reach it over SSH)"
)
READERS = ("nvml", "sim")
MAX_NESTING = 64  # arrays and inline tables in one value; no key of the config needs more than 2


class ConfigError(Exception):
    """A config or host argument the user must fix. `file` and `line` are None when unknown."""

    def __init__(self, file: str | None, line: int | None, message: str) -> None:
        self.file = file
        self.line = line
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.file or "<command line>"
        if self.line is not None:
            where = f"{where}:{self.line}"
        return f"{where}: {self.message}"


@dataclass(frozen=True, slots=True)
class HostSpec:
    """One monitored host, as the transports need it."""

    name: str  # shown in the UI; unique within a config
    address: str = LOCAL  # host name, IP address, ssh config alias, or "local"
    user: str | None = None  # None: ssh config, then the current user
    port: int | None = None  # None: ssh config, then 22
    read_only: bool = False  # no kill on this host; the probe refuses plans too
    sudo: bool = False  # run the probe with `sudo -n` (never prompts)
    python: str | None = None  # the interpreter: None is "python3" remotely, the app's own locally
    jump: str | None = None  # ProxyJump: "[user@]host[:port]", comma-separated for a chain
    wrap: str | None = None  # a command prefix to run the probe through, e.g. "pct exec 129 --"
    reader: str = "nvml"  # "nvml" or "sim"
    sim_scenario: str | None = None  # reader="sim": the scenario name (the sim's default when None)
    sim_variant: int | None = None  # reader="sim": which variant of the scenario
    sim_seed: int | None = None  # reader="sim": a fixed seed, for reproducible demos and tests
    sim_dir: str | None = None  # reader="sim": attach to the sim there (the live demo's; no config key)
    group: str | None = None  # the group its source named (a [groups] name, an Ansible group; no config key)
    # Where a host's records come from when no probe runs for it (no config key; its source sets it):
    # "hub:URL" (a `gputui serve`), "prometheus:URL[#SELECTOR]" (series in a Prometheus).
    feed: str | None = None
    # A node a source names "local" (kube, Slurm, an ssh config Host, an Ansible host without
    # ansible_connection=local): that node, reached over SSH by its name, never this machine, which
    # the word means where the user writes it (no config key).
    over_ssh: bool = False

    def is_local(self) -> bool:
        return self.address == LOCAL and not self.over_ssh

    def wrap_argv(self) -> list[str]:
        """The wrap command as separate words (already checked to split when the spec was made)."""
        return shlex.split(self.wrap) if self.wrap else []


@dataclass(frozen=True, slots=True)
class Config:
    """A loaded config file (or the empty one when there is none)."""

    hosts: tuple[HostSpec, ...] = ()
    interval: float | None = None  # seconds between samples; None: the app's default
    theme: str | None = None
    read_only: bool = False  # every host read-only, whatever its own entry says
    path: str | None = None  # where it was read from
    defaults: Mapping[str, Any] = field(default_factory=dict)  # the [defaults] table, checked
    kill: KillOptions = KillOptions()  # the [kill] table: signals and timeouts of every plan
    # The [columns] table: table ("processes", "gpus", "fleet") -> column keys never shown.
    hidden_columns: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # The [groups] table: a name -> the host specs it stands for (gputui/inventory/sources.py).
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # The [idle] table: minutes at 0 % SM after which a process holding GPU memory is an idle holder
    # (gputui/fleet/idle.py); None: the default.
    idle_minutes: float | None = None


# --------------------------------------------------------------------------- values and their checks

# Checks return an error text (what to fix) or None.
Check = Callable[[Any], "str | None"]


def _text(value: Any) -> str | None:
    # A name, a theme, a command: shown, so held to the characters a host name is (a config host's
    # name is its name in every view and message).
    if not isinstance(value, str) or not value.strip():
        return "must be a non-empty string"
    if unsafe_characters(value):
        return UNSAFE_WORDS
    return None


def _host_word(value: Any) -> str | None:
    """Host addresses and users end up as ssh arguments and in suggested commands: the one rule of
    host names (gputui.config.hostlist.word_problem)."""
    return _text(value) or word_problem(value)


def _bool(value: Any) -> str | None:
    return None if isinstance(value, bool) else "must be true or false"


def _port(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        return "must be a port number from 1 to 65535"
    return None


# TOML's integers are 64-bit; a longer one (tomllib reads any) is no seed or count, and would travel
# to the probe as thousands of digits.
INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1


def _count(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT_MAX:
        return "must be a whole number >= 0 that fits in 64 bits"
    return None


def _int(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or not INT_MIN <= value <= INT_MAX:
        return "must be a whole number that fits in 64 bits"
    return None


def _one_of(choices: tuple[str, ...]) -> Check:
    # A string first: `value in choices` of a list or an inline table raises TypeError on a dict.
    def check(value: Any) -> str | None:
        if isinstance(value, str) and value in choices:
            return None
        return "must be " + " or ".join(f'"{c}"' for c in choices)

    return check


_reader = _one_of(READERS)
_scenario = _one_of(SCENARIOS)  # the sim's scenarios: a typo is found at load, not when the host starts


def _wrap(value: Any) -> str | None:
    problem = _text(value)
    if problem:
        return problem
    try:
        words = shlex.split(value)
    except ValueError as exc:
        return f"does not split into words like a shell command line ({exc})"
    return None if words else "must name a command"


def _jump(value: Any) -> str | None:
    problem = _text(value)
    if problem:
        return problem
    for hop in value.split(","):
        try:
            parse_host_arg(hop.strip())
        except ConfigError as exc:
            return f"hop {hop.strip()!r}: {exc.message}"
    return None


def _interval(value: Any) -> str | None:
    # The protocol's bounds (gputui/probe/wire.py): the probe and the command line check the same.
    return interval_problem(value)


HOST_KEYS: dict[str, Check] = {
    "name": _text,
    "address": _host_word,
    "user": _host_word,
    "port": _port,
    "read_only": _bool,
    "sudo": _bool,
    "python": _text,
    "jump": _jump,
    "wrap": _wrap,
    "reader": _reader,
    "sim_scenario": _scenario,
    "sim_variant": _count,
    "sim_seed": _int,
}
# Per-host identity makes no sense as a default for every host.
DEFAULT_KEYS = {k: v for k, v in HOST_KEYS.items() if k not in ("name", "address")}
TOP_KEYS: dict[str, Check] = {
    "interval": _interval,
    "theme": _text,
    "read_only": _bool,
}
TABLES = ("hosts", "defaults", "kill", "columns", "groups", "idle")


_signals = _one_of(tuple(SIGNAL_PLANS))


def _timeout(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_TIMEOUT:
        return f"must be a number of seconds more than 0 and at most {MAX_TIMEOUT:g}"
    return None


# [kill]: how plans kill, for the dashboard and `gputui clean` alike (flags override it).
KILL_KEYS: dict[str, Check] = {
    "signals": _signals,  # "term" (SIGTERM, then SIGKILL), "int" (SIGINT first), "kill" (at once)
    "sigint_first": _bool,  # the same as signals = "int"
    "term_timeout": _timeout,
    "verify_timeout": _timeout,
}


MAX_IDLE_MINUTES = 7 * 24 * 60  # a week (--idle-minutes has the same bound)
IDLE_MINUTES = 10.0  # [idle] minutes when nothing says: 0 % SM this long makes an idle holder


def idle_threshold(minutes: float | None) -> float:
    """The idle threshold in seconds (None: the default). Here, with the setting, rather than with
    the idle tracker (gputui/fleet/idle.py): every command reads it at start-up, and the tracker
    loads the model's records."""
    return 60.0 * (IDLE_MINUTES if minutes is None else minutes)


def _minutes(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_IDLE_MINUTES:
        return f"must be a number of minutes more than 0 and at most {MAX_IDLE_MINUTES}"
    return None


# [idle]: when a process that holds GPU memory at 0 % SM is an idle holder (docs/FLEET_VIEW.md).
IDLE_KEYS: dict[str, Check] = {"minutes": _minutes}


# [columns]: hide_<table> = [column keys]. The keys are the dashboard's (gputui/ui/widgets; a UI test
# checks that these lists match them). Some are never hidden: what a kill targets must stay in view.
COLUMNS: dict[str, tuple[str, ...]] = {
    "processes": ("user", "container", "gpu", "mem", "sm", "cpu", "rss", "state", "elapsed", "command"),
    "gpus": ("name", "memory", "util", "temp", "power", "util_hist", "mem_hist", "holders"),
    "fleet": ("name", "memory", "util", "temp", "state", "holders", "cpu", "ram"),
}
ALWAYS_SHOWN: dict[str, tuple[str, ...]] = {
    "processes": ("sel", "pid", "kind"),  # what is selected, which process, why it is listed
    "gpus": ("gpu",),
    "fleet": ("host", "gpu"),
}


def _hidden_columns(table: Any, fail: Fail) -> dict[str, frozenset[str]]:
    if not isinstance(table, dict):
        raise fail(None, "columns", "'columns' must be a table: write [columns] on its own line")
    out: dict[str, frozenset[str]] = {}
    keys = [f"hide_{name}" for name in COLUMNS]
    for key, value in table.items():
        where = ("columns", 0)
        if key not in keys:
            line = fail(where, key, "").line
            at = f" (line {line})" if line else ""
            raise fail(where, key, f"unknown key '{key}' in [columns]{at}{_did_you_mean(key, keys)}")
        name = key.removeprefix("hide_")
        known = COLUMNS[name]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail(
                where, key, f"'{key}' in [columns] must be a list of column names (got {_shown(value)})"
            )
        for column in value:
            if column in ALWAYS_SHOWN[name]:
                raise fail(
                    where,
                    key,
                    f"[columns] {key}: the {column!r} column is always shown (what a kill targets stays "
                    f"in view); columns that can be hidden: {', '.join(known)}",
                )
            if column not in known:
                close = difflib.get_close_matches(column, known, n=1, cutoff=0.6)
                hint = f"did you mean '{close[0]}'? " if close else ""
                raise fail(
                    where,
                    key,
                    f"[columns] {key}: unknown column {_shown(column)}; {hint}"
                    f"the {name} columns are: {', '.join(known)}",
                )
        out[name] = frozenset(value)
    return out


# --------------------------------------------------------------------------- command-line hosts

_PORT_RE = re.compile(r"^[0-9]{1,5}$")


def parse_host_arg(arg: str) -> HostSpec:
    """A host as written on the command line, ssh-style.

    `local`, `alias` (an ~/.ssh/config Host), `host`, `user@host`, `user@host:port`, `[::1]`,
    `user@[::1]:2222`; a bare IPv6 address without a port is accepted too. The name shown in the
    UI is the host part (`gpu-c` for `bench@gpu-c:2222`). Raises ConfigError (file None)."""
    text = arg.strip()
    if text == LOCAL:
        return HostSpec(name=LOCAL, address=LOCAL)
    user: str | None = None
    rest = text
    if "@" in text:
        # The last @ splits, as in ssh: a user name may itself contain one.
        user, rest = text.rsplit("@", 1)
        if not user:
            raise _arg_error(arg, "the user before '@' is empty")
    address, port = _split_host_port(arg, rest)
    if address == LOCAL and (user is not None or port is not None):
        raise _arg_error(arg, LOCAL_ALONE)
    for what, value in (("host", address), ("user", user)):
        problem = None if value is None else _host_word(value)
        if problem:
            raise _arg_error(arg, f"the {what} {problem}")
    return HostSpec(name=address, address=address, user=user, port=port)


def _split_host_port(arg: str, rest: str) -> tuple[str, int | None]:
    if rest.startswith("["):
        end = rest.find("]")
        if end < 0:
            raise _arg_error(arg, "'[' without a closing ']' (write IPv6 as [::1] or [::1]:2222)")
        address, tail = rest[1:end], rest[end + 1 :]
        if tail and not tail.startswith(":"):
            raise _arg_error(arg, f"unexpected {quoted(tail)} after ']' (expected ':PORT')")
        port_text = tail[1:] if tail else None
    elif rest.count(":") > 1:
        address, port_text = rest, None  # a bare IPv6 address; a port needs brackets
    elif ":" in rest:
        address, port_text = rest.split(":", 1)
    else:
        address, port_text = rest, None
    if not address:
        raise _arg_error(arg, "no host name")
    if port_text is None:
        return address, None
    if not _PORT_RE.match(port_text) or not 1 <= int(port_text) <= 65535:
        raise _arg_error(arg, f"port {quoted(port_text)} is not a number from 1 to 65535")
    return address, int(port_text)


def _arg_error(arg: str, message: str) -> ConfigError:
    return ConfigError(None, None, f"host {quoted(arg)}: {message}")


# --------------------------------------------------------------------------- where the config is


def default_config_path() -> Path:
    from platformdirs import user_config_dir

    return Path(user_config_dir("gputui")) / "config.toml"


def default_export_dir() -> Path:
    """Where the dashboard's "Export snapshot" writes: beside the audit log, in the user's state dir
    (`~/.local/state/gputui/snapshots`), never wherever the dashboard happened to be started."""
    from platformdirs import user_state_dir  # loaded only when asked: the start-up pays nothing

    return Path(user_state_dir("gputui")) / "snapshots"


def find_config(cli_path: str | None = None, environ: Mapping[str, str] | None = None) -> Path | None:
    """The config file to read: --config, else $GPUTUI_CONFIG, else the user config dir.

    A path the user named must exist (ConfigError otherwise); the default one may be absent (None).
    What is there need not be a file here: load_config says what it is when it is not one."""
    env = os.environ if environ is None else environ
    for named, origin in ((cli_path, "--config"), (env.get(ENV_CONFIG) or None, f"${ENV_CONFIG}")):
        if named:
            path = Path(named).expanduser()
            if not os.path.exists(path):
                raise ConfigError(str(path), None, f"no such config file (named by {origin})")
            return path
    path = default_config_path()
    return path if os.path.exists(path) else None


def load(cli_path: str | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """find_config then load_config; the empty Config when there is no file."""
    path = find_config(cli_path, environ)
    return load_config(path) if path else Config()


# --------------------------------------------------------------------------- reading the file

# Bytes of a config file read at most: as much as a host file (@file:), since a config may list as
# many hosts in its [groups].
MAX_CONFIG_BYTES = userfile.LIST_BYTES


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read and check one TOML config file, and that it and what it names to run are trusted
    (`ownership_problem`). Raises ConfigError with file and line."""
    file = str(path)
    real = os.path.realpath(path)
    try:
        # A regular file, opened without waiting on a FIFO; the owner and mode are those of the
        # file read (fstat of the open file): nobody can swap it between the check and the read.
        fd = userfile.open_regular(real)
        try:
            problem = ownership_problem(real, os.fstat(fd))
            if problem is not None:
                raise ConfigError(file, None, f"bad owner or permissions: {problem}. {UNTRUSTED}")
            text = userfile.read_bounded(fd, MAX_CONFIG_BYTES).decode("utf-8")
        finally:
            os.close(fd)
    except userfile.FileRefused as exc:
        words = exc.reason if exc.kind != "open" else f"cannot read the config: {exc.reason}"
        raise ConfigError(file, None, words) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(file, None, f"cannot read the config: {exc}") from None
    config = parse_config(text, file)
    for host in config.hosts:
        _check_named_files(host, file)
    return config


def _check_named_files(host: HostSpec, file: str) -> None:
    """What a local host's entry names to run here (its python, the first word of its wrap) is
    trusted as the config is. A bare name is PATH's to find, not the config's; a remote host's are
    paths on that host."""
    if not host.is_local():
        return
    named = [("python", host.python)]
    if host.wrap:
        named.append(("wrap command", host.wrap_argv()[0]))
    for what, value in named:
        if not value or "/" not in value:
            continue
        real = os.path.realpath(os.path.expanduser(value))
        if not os.path.exists(real):
            continue  # nothing to run: the transport says so when it starts
        problem = ownership_problem(real)
        if problem is not None:
            raise ConfigError(
                file,
                None,
                f"host {host.name!r}: {what} {value!r}: bad owner or permissions: {problem}. {UNTRUSTED}",
            )


def parse_config(text: str, file: str = "<config>") -> Config:
    """Check one config's text. Raises ConfigError (with `file` and, where known, the line), nothing else."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line, message = _decode_error_line(exc)
        raise ConfigError(file, line, f"not valid TOML: {message}") from None
    except RecursionError:  # the parser recurses once per nested array or inline table
        raise _too_deep(text, file) from None
    except ValueError as exc:  # an integer of thousands of digits
        raise ConfigError(file, None, f"not valid TOML: {exc}") from None
    lines = _KeyLines(text)
    if _depth(data) > MAX_NESTING:
        raise _too_deep(text, file)

    def fail(table: tuple[str, int] | None, key: str | None, message: str) -> ConfigError:
        return ConfigError(file, lines.find(table, key), message)

    for key, value in data.items():
        if key in TABLES:
            continue
        _check_key(key, value, TOP_KEYS, "the top level", None, fail, extra=TABLES)

    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise fail(None, "defaults", "'defaults' must be a table: write [defaults] on its own line")
    for key, value in defaults.items():
        _check_key(key, value, DEFAULT_KEYS, "[defaults]", ("defaults", 0), fail)

    entries = data.get("hosts", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise fail(None, "hosts", "'hosts' must be an array of tables: write [[hosts]] before each host")
    force_read_only = bool(data.get("read_only", False))
    hosts = tuple(
        _host_from_table(i, entry, defaults, force_read_only, fail) for i, entry in enumerate(entries)
    )
    _check_unique_names(hosts, fail)
    kill = _kill_options(data.get("kill", {}), fail)
    hidden_columns = _hidden_columns(data.get("columns", {}), fail)
    groups = _groups(data.get("groups", {}), {h.name for h in hosts}, fail)
    idle = data.get("idle", {})
    if not isinstance(idle, dict):
        raise fail(None, "idle", "'idle' must be a table: write [idle] on its own line")
    for key, value in idle.items():
        _check_key(key, value, IDLE_KEYS, "[idle]", ("idle", 0), fail)
    interval = data.get("interval")
    return Config(
        hosts=hosts,
        interval=None if interval is None else float(interval),
        theme=data.get("theme"),
        read_only=force_read_only,
        path=file,
        defaults=dict(defaults),
        kill=kill,
        hidden_columns=hidden_columns,
        groups=groups,
        idle_minutes=float(idle["minutes"]) if "minutes" in idle else None,
    )


_GROUP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _groups(table: Any, host_names: set[str], fail: Fail) -> dict[str, tuple[str, ...]]:
    """[groups]: name = ["gpu[001-016]", "@file:/etc/rack3", ...]. What each spec lists is found
    when the group is used (a Slurm partition changes); its form is checked here."""
    if not isinstance(table, dict):
        raise fail(None, "groups", "'groups' must be a table: write [groups] on its own line")
    out: dict[str, tuple[str, ...]] = {}
    for name, value in table.items():
        where = ("groups", 0)
        if not _GROUP_NAME.match(name):
            raise fail(where, name, f"[groups]: {name!r} is not a group name (letters, digits, . _ -)")
        if name in host_names:
            raise fail(where, name, f"[groups]: {name!r} is also the name of a [[hosts]] entry: rename one")
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise fail(where, name, f"[groups] {name}: must be a list of host specs (got {_shown(value)})")
        for spec in value:
            problem = _text(spec) or _spec_problem(spec.strip())
            if problem:
                raise fail(where, name, f"[groups] {name}: {_shown(spec)} {problem}")
        out[name] = tuple(v.strip() for v in value)
    return out


def _spec_problem(spec: str) -> str | None:
    if spec.startswith("@"):
        kind, sep, _arg = spec[1:].partition(":")
        if kind not in SOURCES or not sep:
            return "names no source (the sources are " + ", ".join(f"@{k}:" for k in SOURCES) + ")"
        return None
    if is_hostlist(spec):
        try:
            count = size(spec)  # counted, not expanded: a config is read by every command
        except HostlistError as exc:
            return f"is not a hostlist: {exc}"
        if count > MAX_HOSTS:
            return f"names more than {MAX_HOSTS:,} hosts"
    return None


def _kill_options(table: Any, fail: Fail) -> KillOptions:
    if not isinstance(table, dict):
        raise fail(None, "kill", "'kill' must be a table: write [kill] on its own line")
    for key, value in table.items():
        _check_key(key, value, KILL_KEYS, "[kill]", ("kill", 0), fail)
    signals = table.get("signals", DEFAULT_SIGNALS)
    if table.get("sigint_first") is True:
        if "signals" in table and signals != "int":
            raise fail(
                ("kill", 0),
                "sigint_first",
                f"[kill] says sigint_first = true and signals = {signals!r}: keep one",
            )
        signals = "int"
    return KillOptions(
        signals=signals,
        term_timeout=float(table.get("term_timeout", TERM_TIMEOUT)),
        verify_timeout=float(table.get("verify_timeout", VERIFY_TIMEOUT)),
    )


Fail = Callable[["tuple[str, int] | None", "str | None", str], ConfigError]


def _check_key(
    key: str,
    value: Any,
    allowed: Mapping[str, Check],
    where: str,
    table: tuple[str, int] | None,
    fail: Fail,
    extra: tuple[str, ...] = (),
) -> None:
    check = allowed.get(key)
    if check is None:
        line = fail(table, key, "").line
        at = f" (line {line})" if line else ""
        hint = _did_you_mean(key, [*allowed, *extra])
        if key in HOST_KEYS and table is None:
            hint = f": '{key}' belongs in [defaults] or a [[hosts]] entry"
        elif key in ("name", "address") and table == ("defaults", 0):
            hint = f": '{key}' is per host, set it in each [[hosts]] entry"
        raise fail(table, key, f"unknown key '{key}' in {where}{at}{hint}")
    problem = check(value)
    if problem:
        raise fail(table, key, f"'{key}' in {where} {problem} (got {_shown(value)})")


def _shown(value: Any) -> str:
    """A value from the file in a message: its TOML-ish repr, at most 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_NESTING:
            break
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def _too_deep(text: str, file: str) -> ConfigError:
    return ConfigError(
        file,
        _deep_line(text),
        f"arrays or inline tables nested over {MAX_NESTING} deep: no gputui setting needs that",
    )


def _deep_line(text: str) -> int | None:
    """The line where brackets and braces first open over MAX_NESTING deep (strings skipped)."""
    depth = 0
    for number, line in enumerate(text.splitlines(), start=1):
        quote = None
        for char in line:
            if quote:
                quote = None if char == quote else quote
            elif char in "\"'":
                quote = char
            elif char == "#":
                break
            elif char in "[{":
                depth += 1
                if depth > MAX_NESTING:
                    return number
            elif char in "]}":
                depth = max(0, depth - 1)
    return None


def _did_you_mean(key: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(key, choices, n=1, cutoff=0.6)
    if close:
        return f": did you mean '{close[0]}'?"
    return ": known keys are " + ", ".join(sorted(choices))


def _host_from_table(
    index: int, entry: dict[str, Any], defaults: dict[str, Any], force_read_only: bool, fail: Fail
) -> HostSpec:
    table = ("hosts", index)
    where = f"[[hosts]] #{index + 1}"
    for key, value in entry.items():
        _check_key(key, value, HOST_KEYS, where, table, fail)
    values = {**defaults, **entry}
    if "name" not in values and "address" not in values:
        raise fail(table, None, f"{where} needs an 'address' (or a 'name' that is an ssh config alias)")
    # Either one stands in for the other: a name alone is an alias, an address alone is its own name.
    values.setdefault("address", values.get("name"))
    values.setdefault("name", values["address"])
    own = next((key for key in ("user", "port", "jump") if key in entry), None)  # [defaults] apply to all
    if values["address"] == LOCAL and own is not None:
        raise fail(table, own, f"{where}: {LOCAL_ALONE}")
    if force_read_only:
        values["read_only"] = True
    reader = values.get("reader", "nvml")
    for sim_key in ("sim_scenario", "sim_variant", "sim_seed"):
        if sim_key in entry and reader != "sim":
            raise fail(table, sim_key, f"'{sim_key}' in {where} only applies with reader = \"sim\"")
    return HostSpec(**values)


def _check_unique_names(hosts: tuple[HostSpec, ...], fail: Fail) -> None:
    seen: dict[str, int] = {}
    for i, host in enumerate(hosts):
        if host.name in seen:
            first = seen[host.name] + 1
            raise fail(
                ("hosts", i),
                "name",
                f"[[hosts]] #{i + 1} has the same name {host.name!r} as #{first}: give each a unique name",
            )
        seen[host.name] = i


# --------------------------------------------------------------------------- line numbers

_DECODE_AT = re.compile(r"^(.*?)\s*\(at line (\d+), column \d+\)\s*$", re.S)
_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_ASSIGN = re.compile(r"""^\s*(?:"([^"]*)"|'([^']*)'|([A-Za-z0-9_-]+))\s*=""")


def _decode_error_line(exc: Exception) -> tuple[int | None, str]:
    lineno = getattr(exc, "lineno", None)  # Python 3.14 sets it; older ones only in the text
    text = str(exc)
    match = _DECODE_AT.match(text)
    if match:
        return lineno or int(match.group(2)), match.group(1)
    return lineno, text


class _KeyLines:
    """Where each key of each table is written, found by scanning the text (tomllib keeps no
    positions). Best effort: a key inside an inline table or a multi-line value is not found, and
    the error then points at its table's header instead."""

    def __init__(self, text: str) -> None:
        self.keys: dict[tuple[str, int] | None, dict[str, int]] = {None: {}}
        self.headers: dict[tuple[str, int], int] = {}
        table: tuple[str, int] | None = None
        counts: dict[str, int] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            header = _HEADER.match(line)
            if header:
                name = header.group(2).strip().strip("\"'")
                if header.group(1) == "[[":
                    counts[name] = counts.get(name, -1) + 1
                    table = (name, counts[name])
                else:
                    table = (name, 0)
                self.headers[table] = number
                self.keys.setdefault(table, {})
                continue
            assign = _ASSIGN.match(line)
            if assign:
                key = next(g for g in assign.groups() if g is not None)
                self.keys.setdefault(table, {}).setdefault(key, number)

    def find(self, table: tuple[str, int] | None, key: str | None) -> int | None:
        if key is not None:
            line = self.keys.get(table, {}).get(key)
            if line is None and table is None:
                line = self.headers.get((key, 0))  # a top-level key written as a [table]
            if line is not None:
                return line
        if table is not None:
            return self.headers.get(table) or self.keys[None].get(table[0])
        return None
