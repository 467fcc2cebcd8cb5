"""The sim's scenarios, without starting one: the names a config accepts are exactly the scenarios
that say what they run, and every scenario's jobs pass spawn's checks on any number of GPUs."""

import random

import pytest

from gputui.probe.readers.scenarios import SCENARIO_GPUS, SCENARIO_STATE, SCENARIOS
from gputui.probe.readers.sim import SCENARIO_JOBS, SimReader
from gputui.probe.readers.sim.roles import checked_job


def test_the_scenario_names_are_the_scenarios_that_have_jobs():
    # The config checks a name against SCENARIOS; the reader runs SCENARIO_JOBS[name]: a name in one
    # and not the other is a config that loads and a host that cannot start (or a scenario nobody can
    # ask for).
    assert tuple(SCENARIO_JOBS) == SCENARIOS
    assert set(SCENARIO_STATE) <= set(SCENARIOS)
    assert set(SCENARIO_GPUS) <= set(SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_reader_takes_every_scenario_name(scenario):
    reader = SimReader(scenario=scenario)  # not opened: nothing starts
    assert reader.scenario == scenario and 1 <= reader.gpus <= 64


@pytest.mark.parametrize(
    ("scenario", "variant", "gpus"),
    [
        ("demo", 0, 4),
        ("demo", 1, 8),
        ("demo", 2, 4),
        ("demo", 3, 8),
        ("jobs", 0, 8),
        ("jobs", 1, 8),
        ("empty", 1, 4),
    ],
)
def test_a_sims_gpu_count_is_its_scenarios_and_variants(scenario, variant, gpus):
    # demo-a 4 GPUs, demo-b 8 (variants alternate, as the demo's jobs do); what the caller says wins.
    assert SimReader(scenario=scenario, variant=variant).gpus == gpus
    assert SimReader(scenario=scenario, variant=variant, gpus=2).gpus == 2


def test_the_reader_refuses_a_name_that_is_no_scenario():
    with pytest.raises(ValueError, match="unknown sim scenario"):
        SimReader(scenario="demoo")


@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_scenarios_jobs_pass_spawns_checks(scenario, gpus):
    state = SCENARIO_STATE.get(scenario, lambda gpus: {})(gpus)

    def mig_instances(index):
        return [(inst["gi"], inst["ci"]) for inst in state.get(index, {}).get("mig_instances") or []]

    for variant in (0, 1):
        for role, spec in SCENARIO_JOBS[scenario](variant, gpus):
            checked = checked_job(
                role,
                spec.get("gpu", 0),
                spec.get("util"),
                spec.get("name"),
                None,
                spec.get("child"),
                None,
                spec.get("mig"),
                gpus,
                random.Random(0),
                mig_instances,
            )
            assert all(0 <= index < gpus for index in checked.gpus)
