"""The links every page's frame shows (menu, style sheet, icon) are found once, and are the same
addresses as reversing them on the page would give, under any script prefix."""

from __future__ import annotations

import re

import pytest
from django.templatetags.static import static
from django.urls import reverse, set_script_prefix

from anonweb.accounts.context_processors import LINKS, STATIC, base_links

pytestmark = pytest.mark.django_db


def _hrefs(html: str) -> set[str]:
    return set(re.findall(r'(?:href|action)="([^"]+)"', html))


def test_the_frame_links_every_menu_entry_of_an_officer(client, officer):
    officer.is_superuser = True
    officer.save()
    client.force_login(officer)
    html = client.get("/").content.decode()
    expected = {reverse(view) for view in LINKS.values()} | {static(p) for p in STATIC.values()}
    assert expected <= _hrefs(html)


def test_an_analyst_sees_no_staff_entries(client, analyst):
    client.force_login(analyst)
    hrefs = _hrefs(client.get("/releases/").content.decode())
    assert reverse("releases:list") in hrefs and reverse("audit:list") in hrefs
    assert reverse("datasets:list") not in hrefs and reverse("admin:index") not in hrefs


def test_the_links_follow_the_script_prefix():
    try:
        set_script_prefix("/anonweb/")
        links = base_links()
        assert links["home"] == "/anonweb/" and links["logout"] == "/anonweb/accounts/logout/"
    finally:
        set_script_prefix("/")
    assert base_links()["home"] == "/"
    assert base_links() == {
        **{name: reverse(view) for name, view in LINKS.items()},
        **{name: static(path) for name, path in STATIC.items()},
    }


def test_a_changed_setting_finds_them_again(settings):
    before = base_links()["css"]
    settings.STATIC_URL = "/assets/"
    assert base_links()["css"] == "/assets/css/app.css" != before
