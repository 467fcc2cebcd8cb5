"""The main screen's keys, in one table (htop's way: `keys['F'] = Action_follow`): the keys that act
wherever the focus is (quit, help, filter, free a GPU or a host, stop a job, pause, switch hosts, the
views). A pane's own keys (select, detail, fold, sort) are bound on its widget. The order is the
footer's and the help's."""

from __future__ import annotations

from textual.binding import Binding, BindingType

MAIN_KEYS: list[BindingType] = [
    Binding("q", "app.quit", "Quit"),
    Binding(
        "question_mark", "app.help", "Help", key_display="?", tooltip="every key, and what the kinds mean"
    ),
    Binding(
        "slash",
        "filter",
        "Filter",
        key_display="/",
        tooltip="filter the focused table: a word (command, user, PID), or user:alice "
        "state:idle-held host:gpu0* group:rack3 mem>40G, -term to negate (docs/FLEET_VIEW.md)",
    ),
    Binding("escape", "clear_filter", "Clear filter", show=False, tooltip="clear every filter"),
    Binding("o", "free_only", "Free only", tooltip="fleet table: only free GPUs (again: all)"),
    Binding("f", "free_gpu", "Free GPU", tooltip="free the GPU under the cursor: kill its holders, verify"),
    Binding("F", "free_host", "Free host", tooltip="free every GPU of this host"),
    Binding(
        "x",
        "plan",
        "Plan",
        show=False,
        tooltip="kill the selected processes (or the one under the cursor)",
    ),
    Binding(
        "X",
        "stop_job",
        "Stop job",
        tooltip="stop the job under the cursor (a job's row, or a process's job): its root, every "
        "member, verified",
    ),
    # Where a kill key is not offered (read-only, no GPU, not connected), pressing it says why.
    Binding("f", "refuse('free_gpu')", show=False),
    Binding("F", "refuse('free_host')", show=False),
    Binding("x", "refuse('plan')", show=False),
    Binding("X", "refuse('stop_job')", show=False),
    Binding("I", "refuse('select_idle')", show=False),
    Binding("i", "gpu_detail", "GPU view", tooltip="the GPU under the cursor: memory, settings, history"),
    Binding("l", "toggle_log", "Log", tooltip="show or hide the action log"),
    Binding("b", "toggle_hosts", "Host list", show=False, tooltip="show or hide the host list"),
    Binding("left_square_bracket", "step_host(-1)", "Previous host", key_display="[", show=False),
    Binding("right_square_bracket", "step_host(1)", "Next host", key_display="]", show=False),
    Binding("t", "toggle_tree", "Tree", tooltip="processes as a tree of families (again: a list)"),
    Binding(
        "J",
        "toggle_jobs",
        "Jobs",
        tooltip="processes grouped by job, each job a row above its members (again: a list)",
    ),
    Binding("T", "app.next_theme", "Next theme", show=False, tooltip="next gputui theme (ctrl+p: any theme)"),
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
        "I",
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
