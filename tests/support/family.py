"""A process family for the rescan tests: a target job on a sim GPU and relatives that keep its memory
or hold its device files, all started below one subreaper that reaps every one of them.

    python tests/support/family.py SIMDIR GPU BYTES ROLE...

The target makes its own session and process group, then (after forking the relatives that must
hold nothing yet) opens the sim's device files and makes a context of BYTES on GPU: NVML lists it.
Roles, any of:
  late-child    forked by the target before it opens anything, then in a session of its own: a
                descendant, linked to the target by nothing else, that holds nothing until told to
                open the device files ("open late-child" on stdin)
  group-member  in the target's process group and session but not below it (the parent it was forked
                from exits at once): holds nothing until told ("open group-member")
  group-holder  like group-member, but forked after the context: it keeps the target's memory, so NVML
                lists the target until it is gone too
  fork-on-term  the target, on SIGTERM, forks a child that inherits its context (a new PID that keeps
                its memory), then exits
Every member writes one JSON line to stdout when it is up ({"who", "pid", "start_time"}) and one when
it has opened the device files ({"who", "event": "opened"}). EOF on stdin ends them all (each watches
a lifeline pipe); the top process reaps everything below it, then exits. Nothing here signals anyone.
"""

import ctypes
import json
import os
import select
import signal
import sys

from gputui.probe.readers.sim import create_context, open_devices, start_time

PR_SET_CHILD_SUBREAPER = 36
ROLES = ("late-child", "group-member", "group-holder", "fork-on-term")


def say(**fields):
    os.write(1, (json.dumps(fields) + "\n").encode())


def up(who):
    say(who=who, pid=os.getpid(), start_time=start_time(os.getpid()))


def live(who, lifeline, command=None, simdir=None):
    """Until EOF on the lifeline; open the device files when told (a byte on `command`)."""
    poller = select.poll()
    poller.register(lifeline, select.POLLIN)
    if command is not None:
        poller.register(command, select.POLLIN)
    held = []
    while True:
        for fd, _ in poller.poll():
            if fd == lifeline or not os.read(command, 1):
                os._exit(0)
            held.extend(open_devices(simdir))
            say(who=who, event="opened")


def main():
    simdir, gpu, nbytes, roles = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    assert set(roles) <= set(ROLES), roles
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    lifeline, keep_alive = os.pipe()
    commands = {role: os.pipe() for role in ("late-child", "group-member")}
    writers = [keep_alive] + [w for _, w in commands.values()]

    def child(body):
        """Fork a member: it closes every write end (so EOF reaches everyone) and runs `body`."""
        pid = os.fork()
        if pid == 0:
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for fd in writers:
                    try:
                        os.close(fd)
                    except OSError:
                        pass  # closed already (a member's own child)
                body()
            finally:
                os._exit(0)
        return pid

    def detached(body):
        """A member in the caller's process group and session whose parent exits at once."""

        def middle():
            child(body)

        os.waitpid(child(middle), 0)

    def target():
        os.setsid()
        if "late-child" in roles:
            child(
                lambda: (
                    os.setsid(),
                    up("late-child"),
                    live("late-child", lifeline, commands["late-child"][0], simdir),
                )
            )
        if "group-member" in roles:
            detached(
                lambda: (
                    up("group-member"),
                    live("group-member", lifeline, commands["group-member"][0], simdir),
                ),
            )
        held = open_devices(simdir)
        held.append(create_context(simdir, gpu, nbytes))
        if "group-holder" in roles:
            detached(lambda: (up("group-holder"), live("group-holder", lifeline)))
        if "fork-on-term" in roles:

            def on_term(_sig, _frame):
                # Blocked across the fork: a SIGTERM that reached the child before its handler was
                # reset would be taken by this handler's flag and then dropped (SIG_DFL is not
                # called), and the child would live on to SIGKILL. It stays blocked until the child
                # has said it is up: the engine can find and signal it within milliseconds, and a
                # child killed before its line would leave the test waiting for it. Unblocked, a
                # pending SIGTERM is delivered.
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
                if os.fork() == 0:
                    signal.signal(signal.SIGTERM, signal.SIG_DFL)
                    up("term-child")
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
                    live("term-child", lifeline)
                os._exit(0)

            signal.signal(signal.SIGTERM, on_term)
        up("target")
        live("target", lifeline)

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda _sig, _frame: None)
    signal.set_wakeup_fd(wake_w)
    child(target)
    poller = select.poll()
    poller.register(0, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    stdin = os.fdopen(0, "rb", buffering=0)
    while True:
        for fd, _ in poller.poll():
            if fd == wake_r:
                os.read(wake_r, 512)
                try:
                    while os.waitpid(-1, os.WNOHANG)[0]:
                        pass
                except ChildProcessError:
                    pass
                continue
            line = stdin.readline()
            if not line:
                poller.unregister(0)
                for w in writers:
                    os.close(w)
                while True:  # every member sees EOF on its lifeline and exits: reap them all
                    try:
                        os.waitpid(-1, 0)
                    except ChildProcessError:
                        return
            word, role = line.decode().split()
            assert word == "open", line
            os.write(commands[role][1], b"o")


if __name__ == "__main__":
    main()
