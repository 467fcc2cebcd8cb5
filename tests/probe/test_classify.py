"""Classification and attribution rules (docs/ARCHITECTURE.md), on plain inputs."""

from gputui.probe.classify import ProcFacts, classify, protection, zombie_candidates

SELF = 900


def facts(table):
    """lookup() over a dict of pid -> (comm, state, ppid, pgid, sid)."""
    return lambda pid: ProcFacts(*table[pid]) if pid in table else None


def test_listed_live_process_is_a_user_with_its_gpus():
    out = classify({10: {0: 1 << 30, 1: None}}, {10}, facts({10: ("python", "R", 1, 10, 10)}), SELF)
    assert out[10].kind == "user" and out[10].gpus == [0, 1]


def test_listed_dead_pid_is_a_ghost_and_names_its_hidden_holder():
    # GPU_FACTS "Ghosts": P (dead, still listed) forked child C that keeps the memory; C shares P's pgid/sid.
    table = {11: ("python", "S", 1, 10, 10)}
    out = classify({10: {3: 9 << 30}}, {11}, facts(table), SELF)
    assert out[10].kind == "ghost" and out[10].reason == "dead" and out[10].gpus == [3]
    assert out[11].kind == "hidden" and out[11].reason == "pgid" and out[11].gpus == [3]
    assert out[10].links == [11]
    assert out[11].links == [10]


def test_ghost_in_a_container_is_in_another_namespace():
    out = classify({10: {0: 1}}, set(), facts({}), SELF, foreign_pids=True)
    assert out[10].reason == "other-namespace"


def test_listed_zombie_is_a_ghost():
    out = classify({10: {0: 1}}, set(), facts({10: ("python", "Z", 5, 10, 10)}), SELF)
    assert (out[10].kind, out[10].reason) == ("ghost", "zombie")


def test_hidden_holder_attributed_by_session_then_ancestry():
    table = {
        20: ("python", "S", 1, 20, 20),  # user on GPU 1, session leader
        21: ("worker", "S", 20, 21, 20),  # own group, same session
        30: ("python", "S", 1, 30, 30),  # user on GPU 2
        31: ("sh", "S", 30, 31, 31),  # setsid'd child of 30...
        32: ("python", "S", 31, 32, 31),  # ...whose child holds the files
    }
    out = classify({20: {1: 5}, 30: {2: 5}}, {20, 21, 30, 32}, facts(table), SELF)
    assert (out[21].kind, out[21].reason, out[21].gpus) == ("hidden", "sid", [1])
    assert (out[32].kind, out[32].reason, out[32].gpus, out[32].links) == ("hidden", "ancestor", [2], [30])


def test_unlinked_holder_is_unattributed():
    table = {40: ("python", "S", 1, 40, 40), 41: ("python", "S", 1, 41, 41)}
    out = classify({40: {0: 5}}, {40, 41}, facts(table), SELF)
    assert (out[41].kind, out[41].reason, out[41].gpus) == ("hidden", "unattributed", [])


def test_ancestry_walk_stops_at_the_probe_chain():
    # The probe's ancestors (sshd, shell) would otherwise "link" everything they started.
    table = {50: ("python", "S", 7, 50, 50), 7: ("bash", "S", 1, 7, 7)}
    out = classify({7: {0: 1}}, {50}, facts(table), SELF, stop={7})
    assert out[50].reason == "unattributed"


def test_monitors_and_the_probe_itself():
    table = {60: ("nv-hostengine", "S", 1, 60, 60), SELF: ("python3", "S", 1, SELF, SELF)}
    table[61] = ("nvidia-persiste", "S", 1, 61, 61)  # comm is cut at 15 characters
    out = classify({}, {60, 61, SELF}, facts(table), SELF)
    assert out[60].kind == out[61].kind == out[SELF].kind == "monitor"
    assert out[SELF].reason == "self"


def test_zombie_candidates_are_only_those_tied_to_gpu_work():
    table = {
        70: ("python", "Z", 20, 20, 20),  # child of GPU job 20
        71: ("sh", "Z", 99, 99, 99),  # unrelated zombie
        72: ("python", "Z", 98, 98, 98),  # a GPU process seen before, now a zombie
    }
    keep = zombie_candidates([70, 71, 72], facts(table), {20}, {72})
    assert keep == {70, 72}
    out = classify({}, set(), facts(table), SELF, zombies=keep)
    assert (out[70].kind, out[70].reason, out[70].links) == ("zombie", "parent 20", [20])


def test_protection_reasons():
    assert protection(1, "user", SELF, set()) == "pid-1"
    assert protection(SELF, "monitor", SELF, set()) == "probe"
    assert protection(5, "user", SELF, {5}) == "probe-ancestor"
    assert protection(6, "hidden", SELF, set(), kthread=True) == "kernel-thread"
    assert protection(7, "monitor", SELF, set()) == "monitor"
    assert protection(8, "user", SELF, set()) is None
