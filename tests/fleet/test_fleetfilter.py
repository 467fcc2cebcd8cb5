"""The filter language (gputui/views/filter.py): what each term matches, and what a filter that cannot
be read says. Properties: parsing never raises anything but FilterError, a negated term matches
exactly what the term does not, and terms are ANDed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.views.filter import STATES, FilterError, Subject, exact_value, parse

GiB = 1 << 30

GPU = Subject(
    host="gpu017",
    group="rack3",
    states=frozenset({"live", "busy", "problem", "idle-held"}),
    users=frozenset({"alice", "bob"}),
    kinds=frozenset({"user"}),
    gpus=frozenset({3}),
    models=("NVIDIA H200",),
    commands=("python train.py --model llama-3.1-8b", "python -m vllm.entrypoints serve"),
    pids=frozenset({4121, 5003}),
    jobs=frozenset({"4100"}),
    containers=("lxc/129",),
    memory=60 * GiB,
    memory_total=141 * GiB,
    util=0.0,
    temp=41.0,
    idle=720.0,
)
EMPTY = Subject(
    host="gpu002", group="gpu", states=frozenset({"live", "free", "healthy"}), gpus=frozenset({0})
)


def matches(text: str, subject: Subject = GPU) -> bool:
    return parse(text).matches(subject)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", True),
        ("user:alice", True),
        ("user:ALICE", True),
        ("user:ali", False),  # a name is the whole name
        ("user:ali*", True),
        ("-user:alice", False),
        ("-user:carol", True),
        ("host:gpu017", True),
        ("host:gpu0*", True),
        ("host:gpu1*", False),
        ("host:gpu01?", True),
        ("group:rack3", True),
        ("group:rack*", True),
        ("-group:rack3", False),
        ("state:idle-held", True),
        ("state:idle", True),  # an alias
        ("state:free", False),
        ("-state:free", True),
        ("kind:user", True),
        ("kind:ghost", False),
        ("gpu:3", True),
        ("gpu:4", False),
        ("pid:4121", True),
        ("job:4100", True),
        ("model:h200", True),  # a piece of a longer text
        ("model:A100", False),
        ("cmd:train", True),
        ('cmd:"--model llama"', True),
        ("container:lxc/129", True),
        ("mem>40G", True),
        ("mem>40", True),  # GiB when no unit says
        ("mem>=60GiB", True),
        ("mem>60G", False),
        ("mem<61441M", True),
        ("mem<61440M", False),
        ("mem>0.05T", True),
        ("mem>40%", True),
        ("mem>50%", False),
        ("util<5", True),
        ("util>0", False),
        ("temp>40", True),
        ("temp>40C", True),
        ("idle>10m", True),
        ("idle>15", False),  # minutes
        ("idle>=720s", True),
        ("idle<1h", True),
        ("user:alice mem>40G state:idle-held", True),
        ("user:alice mem>80G", False),
        ("train", True),  # a bare word: as the filter box always searched
        ("TRAIN", True),
        ("gpu017", True),
        ("4121", True),
        ("412", True),
        ("alice", True),
        ("nothing-like-it", False),
        ("-nothing-like-it", True),
        ('"entrypoints serve"', True),
        ('"http://x:8000"', False),
    ],
)
def test_what_each_term_matches(text: str, expected: bool) -> None:
    assert matches(text) is expected


def test_a_value_the_row_does_not_have_matches_no_comparison() -> None:
    # No memory, temperature or idle figure: every comparison false, every negated one true.
    for text in ("mem>1G", "mem<1000G", "temp>0", "util<100", "idle>0s", "mem>1%"):
        assert not matches(text, EMPTY), text
        assert matches("-" + text, EMPTY), text


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("usr:alice", "unknown field 'usr': did you mean user:? fields are host, group, user"),
        ("serve:8000", 'to search for the text itself, quote it: "serve:8000"'),
        ("state:idel", "unknown state 'idel': did you mean state:idle-held?"),
        ("state:nope", "states are live, down, stale"),
        ("kind:ghosts", "unknown kind 'ghosts': kinds are user, ghost"),
        ("mem:40G", "mem compares: "),
        ("mem>", "mem> needs a value"),
        ("mem>lots", "mem>lots: not an amount"),
        ("mem>40X", "a size is 40G, 40GiB, 512M, 1.5T or 90%"),
        ("idle>5y", "a time is 30s, 10m, 2h or 1d"),
        ("util>5G", "util>5G: a plain number"),
        ("user>alice", "user is compared with ':'"),
        ("gpu:x", "gpu:x is no GPU index"),
        ("pid:-4", "pid:-4 is no PID"),
        ('cmd:"train', "the quote at character 1 is never closed"),
        ("user:alice -", "an empty word"),
        ("x" * 1001, "a filter of at most 1000 characters"),
    ],
)
def test_a_filter_that_cannot_be_read_says_what_to_fix(text: str, words: str) -> None:
    with pytest.raises(FilterError) as caught:
        parse(text)
    assert words in caught.value.message


def test_the_error_says_where() -> None:
    with pytest.raises(FilterError) as caught:
        parse("user:alice   usr:bob")
    assert caught.value.at == 13


def test_every_state_parses_and_the_query_knows_its_fields() -> None:
    for state in STATES:
        assert parse(f"state:{state}").terms[0].value == state
    query = parse("user:alice train -mem>4G")
    assert query.fields() == {"user", "", "mem"} and bool(query) and not parse("   ")


# -- properties ---------------------------------------------------------------------------------

subjects = st.builds(
    Subject,
    host=st.sampled_from(["gpu001", "gpu017", "node-a", "Gpu0"]),
    group=st.sampled_from(["gpu", "rack3", "node"]),
    states=st.frozensets(st.sampled_from(sorted(STATES))),
    users=st.frozensets(st.sampled_from(["alice", "bob", "root"])),
    kinds=st.frozensets(st.sampled_from(["user", "ghost", "hidden"])),
    gpus=st.frozensets(st.integers(0, 7)),
    commands=st.lists(st.sampled_from(["python train.py", "vllm serve", "bash run.sh"]), max_size=2).map(
        tuple
    ),
    memory=st.none() | st.integers(0, 200 * GiB),
    memory_total=st.none() | st.just(141 * GiB),
    util=st.none() | st.floats(0, 100),
    temp=st.none() | st.floats(20, 95),
    idle=st.none() | st.floats(0, 10_000),
)
terms = st.sampled_from(
    [
        "user:alice", "user:b*", "host:gpu0*", "group:rack3", "state:free", "state:idle-held", "kind:ghost",
        "gpu:3", "cmd:train", "mem>40G", "mem<=8G", "mem>50%", "util<5", "temp>80", "idle>10m", "train",
        "gpu0", "alice",
    ]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(subjects, terms)
def test_a_negated_term_matches_exactly_what_the_term_does_not(subject: Subject, term: str) -> None:
    assert parse("-" + term).matches(subject) is not parse(term).matches(subject)


@settings(max_examples=300, deadline=None)
@given(subjects, st.lists(terms, min_size=1, max_size=4))
def test_terms_are_anded(subject: Subject, chosen: list[str]) -> None:
    assert parse(" ".join(chosen)).matches(subject) is all(parse(t).matches(subject) for t in chosen)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('ab:-><=%*?" .0123456789GmusertaihMk')), max_size=40))
def test_any_text_parses_or_says_why_never_anything_else(text: str) -> None:
    try:
        query = parse(text)
    except FilterError as exc:
        assert exc.message and 0 <= exc.at <= len(text)
        return
    query.matches(GPU)
    query.matches(EMPTY)


NAMES = ("[i]mallory", "a*", "b?c", "x]y", "with space", 'quo"te', "alice")


@pytest.mark.parametrize("name", NAMES)
def test_an_exact_value_matches_the_name_and_no_other(name: str) -> None:
    """A name picked from a list (the Users screen) filters by that name only: its wildcard
    characters are written as sets, a space quoted (a double quote, which cannot be written, is the
    one character `?` matches)."""
    query = parse(f"user:{exact_value(name)}")
    assert query.matches(Subject(users=frozenset({name})))
    for other in NAMES:
        if other != name and not ('"' in name and other == name.replace('"', "'")):
            assert not query.matches(Subject(users=frozenset({other}))), (name, other)
    assert not query.matches(Subject(users=frozenset({name.strip("[]*?") + "x"})))
    assert not query.matches(Subject(users=frozenset({"imallory", "ab", "bxc"})))


@given(st.text(alphabet='ab*?[]! "', min_size=1, max_size=8))
@settings(max_examples=300, deadline=None)
def test_an_exact_value_always_parses_and_matches_its_name(name: str) -> None:
    assert parse(f"user:{exact_value(name)}").matches(Subject(users=frozenset({name})))
