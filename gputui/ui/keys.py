"""The main screen's keys, in one table (htop's way: `keys['F'] = Action_follow`): the keys that act
wherever the focus is (quit, help, filter, free a GPU or a host, stop a job, pause, switch hosts, the
views). A pane's own keys (select, detail, fold, sort) are bound on its widget. The order is the
help's; the footer ranks them per pane (gputui/ui/widgets/footer.py).

The keys people bring from htop and nvitop do what they do there: F1 help, F3 (search) and F4 the
filter, F5 the tree, F6 a sort menu, F9 a signal menu, F10 quit; nvitop's T, K and I plan SIGTERM,
SIGKILL and SIGINT for the selected processes, through the same plan dialog as x (it opens on
Cancel). So the next theme is ctrl+t, and the idle holders H."""

from __future__ import annotations

from textual.binding import Binding, BindingType

HELP = "every key, and what the kinds mean"
FILTER = (
    "filter the focused table: a word (command, user, PID), or user:alice state:idle-held host:gpu0* "
    "group:rack3 mem>40G, -term to negate (docs/FLEET_VIEW.md)"
)
TREE = "processes as a tree of families (again: a list)"
# The one-key signals: the key, its plan's ladder, the key's label, what it plans.
SIGNAL_KEYS = (
    ("T", "term", "SIGTERM", "SIGTERM (then SIGKILL)"),
    ("K", "kill", "SIGKILL", "SIGKILL at once"),
    ("I", "int", "SIGINT", "SIGINT (then SIGTERM, SIGKILL)"),
)

MAIN_KEYS: list[BindingType] = [
    Binding("q", "app.quit", "Quit"),
    Binding("f10", "app.quit", "Quit", show=False),
    Binding("question_mark", "app.help", "Help", key_display="?", tooltip=HELP),
    Binding("f1", "app.help", "Help", show=False, tooltip=HELP),
    # A priority binding: the app runs it as the key comes, before it hands on the next keys of the
    # same read, so they go to the box it opens (MainScreen.check_action: not while typing in it).
    Binding("slash", "filter", "Filter", key_display="/", tooltip=FILTER, priority=True),
    Binding("f3", "filter", "Filter", show=False, tooltip=FILTER),  # htop's search: here the filter
    Binding("f4", "filter", "Filter", show=False, tooltip=FILTER),
    Binding("escape", "clear_filter", "Clear filter", show=False, tooltip="clear every filter"),
    Binding("o", "free_only", "Free only", tooltip="fleet table: only free GPUs (again: all)"),
    Binding("f", "free_gpu", "Free GPU", tooltip="free the GPU under the cursor: kill its holders, verify"),
    Binding("F", "free_host", "Free host", tooltip="free every GPU of this host"),
    Binding("x", "plan", "Plan", tooltip="kill the selected processes (or the one under the cursor)"),
    Binding(
        "X",
        "stop_job",
        "Stop job",
        tooltip="stop the job under the cursor (a job's row, or a process's job): its root, every "
        "member, verified",
    ),
    # nvitop's one-key signals: in the help, not the footer (x is there: the same plan, its ladder
    # changed in the dialog).
    *[
        Binding(key, f"signal_plan('{plan}')", label, show=False, tooltip=f"plan {what} for the selection")
        for key, plan, label, what in SIGNAL_KEYS
    ],
    Binding(
        "f9",
        "signal_menu",
        "Signal",
        show=False,
        tooltip="choose the signals (T, I, K, SIGHUP first, SIGUSR1 first) for the selection, as htop's F9",
    ),
    # Where a kill key is not offered (read-only, no GPU, not connected), pressing it says why.
    Binding("f", "refuse('free_gpu')", show=False),
    Binding("F", "refuse('free_host')", show=False),
    Binding("x", "refuse('plan')", show=False),
    Binding("X", "refuse('stop_job')", show=False),
    *[Binding(key, "refuse('signal_plan')", show=False) for key, *_ in SIGNAL_KEYS],
    Binding("f9", "refuse('signal_menu')", show=False),
    Binding("H", "refuse('select_idle')", show=False),
    Binding("i", "gpu_detail", "GPU view", tooltip="the GPU under the cursor: memory, settings, history"),
    Binding("l", "toggle_log", "Log", tooltip="show or hide the action log"),
    Binding("b", "toggle_hosts", "Host list", show=False, tooltip="show or hide the host list"),
    Binding("left_square_bracket", "step_host(-1)", "Previous host", key_display="[", show=False),
    Binding("right_square_bracket", "step_host(1)", "Next host", key_display="]", show=False),
    Binding("t", "toggle_tree", "Tree", tooltip=TREE),
    Binding("f5", "toggle_tree", "Tree", show=False, tooltip=TREE),
    Binding(
        "f6",
        "sort_menu",
        "Sort by",
        show=False,
        tooltip="the focused table's columns by name: the one chosen sorts it (as its number does)",
    ),
    Binding(
        "J",
        "toggle_jobs",
        "Jobs",
        tooltip="processes grouped by job, each job a row above its members (again: a list)",
    ),
    Binding(
        "ctrl+t", "app.next_theme", "Next theme", show=False, tooltip="next gputui theme (ctrl+p: any theme)"
    ),
    Binding(
        "z,Z",
        "toggle_pause",
        "Pause",
        key_display="z",
        show=False,
        tooltip="pause: freeze the view, samples still kept (again: resume)",
    ),
    Binding("m", "app.toggle_mib", "MiB", show=False, tooltip="memory in exact MiB (again: GiB)"),
    Binding(
        "H",
        "select_idle",
        "Idle holders",
        show=False,
        tooltip="select the idle holders (GPU memory held at 0 % SM for the idle minutes) of the host "
        "in view, or of the whole fleet: x then plans their kill (again: unselect them)",
    ),
    Binding(
        "U",
        "users",
        "Users",
        tooltip="GPUs and memory per user across the fleet (enter there: that user's GPUs here)",
    ),
]

# The footer's keys per focused pane (its id), most useful there first: what fits at 80 columns is
# what that pane is for, then help and quit; a wider terminal shows the rest, these first.
_EVERYWHERE = ("app.help", "app.quit", "filter", "sort_column(1)")
_VIEWS = ("gpu_detail", "toggle_tree", "toggle_jobs", "toggle_log", "users")
FOOTER_RANKS: dict[str, tuple[str, ...]] = {
    "procs": (
        "screen.toggle_select",
        "plan",
        "screen.proc_detail",
        *_EVERYWHERE[:2],
        "toggle_tree",
        "toggle_jobs",
        "stop_job",
        *_EVERYWHERE[2:],
    ),
    "gpus": ("free_gpu", "free_host", "gpu_detail", *_EVERYWHERE, "toggle_log", "users", "stop_job"),
    "fleet": ("free_only", "gpu_detail", "free_gpu", *_EVERYWHERE, "users", "free_host", "toggle_log"),
    "hosts": ("free_host", "users", *_EVERYWHERE[:3], "toggle_log"),
    "log": ("toggle_log", "filter", *_EVERYWHERE[:2]),
}
FOOTER_RANKS = {pane: (*rank, *_VIEWS) for pane, rank in FOOTER_RANKS.items()}
