"""The form of a release's recipients, as the launch page, the API and ``anonymize`` read it."""

from __future__ import annotations

import pytest

from anonweb.core.release.recipients import (
    RecipientError,
    group_name,
    parse_recipients,
    split_recipients,
)


@pytest.mark.parametrize(
    "names,parsed",
    [
        (None, ()),
        ([], ()),
        (["ana"], ("ana",)),
        ([" ana ", "group:qa", "ana"], ("ana", "group:qa")),
        (["GROUP: Internal QA"], ("group:Internal QA",)),
        (["j.doe@example.org", "x_y-z+1"], ("j.doe@example.org", "x_y-z+1")),
    ],
)
def test_names_are_kept_once_in_the_order_given(names, parsed):
    assert parse_recipients(names) == parsed


@pytest.mark.parametrize(
    "names,message",
    [
        ("ana", "a list of names"),
        (["ana bob"], "'ana bob' is not a username"),
        (["group:"], "'group:' does not name a group"),
        (["group:qa;drop"], "'group:qa;drop' does not name a group"),
        ([7], "7 is not a name"),
        ([""], "'' is not a username"),
    ],
)
def test_a_malformed_name_is_refused_with_the_reason(names, message):
    with pytest.raises(RecipientError, match="recipients: .*" + message.replace("(", r"\(")):
        parse_recipients(names)


def test_every_malformed_name_is_listed_at_once():
    with pytest.raises(RecipientError) as exc:
        parse_recipients(["a b", "group:", "ok"])
    assert str(exc.value) == (
        "recipients: 'a b' is not a username (or group:NAME for a group); "
        "'group:' does not name a group (group:NAME)"
    )


def test_one_field_splits_on_commas_and_line_breaks():
    assert split_recipients("ana, group:qa\nbob,,\r\n") == ["ana", " group:qa", "bob"]
    assert parse_recipients(split_recipients("ana, group:qa\nbob")) == ("ana", "group:qa", "bob")
    assert split_recipients("") == []


def test_group_name():
    assert group_name("group:qa") == "qa" and group_name("ana") is None
