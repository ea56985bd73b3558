"""What-if in a real browser: moving a level slider and the suppression slider changes k,
classes, suppressed records and the charts, without a job or a reload."""

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from anonweb.accounts.models import Role
from tests.browser.conftest import login
from tests.web.conftest import csv_upload
from tests.web.factories import TeamFactory, member

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
SHOTS = Path(os.environ.get("ANONWEB_SCREENSHOTS", "var/test/screenshots"))


def _table(n=400, seed=3):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "zip": rng.choice([f"{z:05d}" for z in range(2100, 2140)], n),
            "age": rng.integers(18, 90, n),
            "sex": rng.choice(["F", "M"], n),
            "diagnosis": rng.choice(["flu", "asthma", "diabetes"], n),
        }
    )


def _figure(page, name):
    return page.locator(f"[data-testid=whatif-{name}]").inner_text()


def _wait_change(page, name, before):
    page.wait_for_function(
        "([sel, old]) => { const e = document.querySelector(sel);"
        " return e && e.textContent !== old && e.textContent !== '…'; }",
        arg=[f"[data-testid=whatif-{name}]", before],
        timeout=20_000,
    )


def _slide(page, testid, value):
    page.locator(f"[data-testid={testid}]").evaluate(
        "(el, v) => { el.value = v; el.dispatchEvent(new Event('input', {bubbles: true})); }",
        str(value),
    )


def test_sliders_update_the_figures_and_charts(page, live_server, settings, tmp_path):
    from anonweb.datasets.services import dataset_create, dataset_set_tags

    settings.MEDIA_ROOT = tmp_path / "media"
    team = TeamFactory(name="What-if team")
    officer = member(team, Role.PRIVACY_OFFICER, username="olga")
    ds = dataset_create(user=officer, team=team, upload=csv_upload(_table()), name="clinic")
    dataset_set_tags(
        user=officer,
        dataset=ds,
        tags={
            "zip": "quasi_identifier",
            "age": "quasi_identifier",
            "sex": "quasi_identifier",
            "diagnosis": "sensitive",
        },
    )
    login(page, live_server.url, "olga")
    page.goto(f"{live_server.url}/datasets/{ds.pk}/")
    page.wait_for_selector("[data-testid=whatif-level-zip]", timeout=20_000)
    page.wait_for_function(
        "() => document.querySelector('[data-testid=whatif-k]').textContent !== '…'"
    )
    k0, classes0 = _figure(page, "k"), _figure(page, "classes")
    assert k0 == "1"
    assert page.locator("#whatif .whatif-charts .plot").count() >= 2

    # ZIP to its top level and age in decades: far fewer classes (18-19 a small one)
    top = page.locator("[data-testid=whatif-level-zip]").get_attribute("max")
    _slide(page, "whatif-level-zip", top)
    _wait_change(page, "classes", classes0)
    _slide(page, "whatif-level-age", 1)
    page.wait_for_timeout(400)
    page.wait_for_function("() => !document.getElementById('whatif').hasAttribute('aria-busy')")
    classes1 = int(_figure(page, "classes").replace(",", ""))
    assert classes1 < int(classes0.replace(",", ""))
    assert float(_figure(page, "loss")) > 0
    assert "e.g." in page.locator("[data-testid=whatif-level-value-zip]").inner_text()

    # a suppression limit: the smallest classes go, k rises
    k1 = _figure(page, "k")
    _slide(page, "whatif-suppression", 0.05)
    _wait_change(page, "suppressed", _figure(page, "suppressed"))
    page.wait_for_function("() => !document.getElementById('whatif').hasAttribute('aria-busy')")
    assert int(_figure(page, "k")) > int(k1)
    assert not _figure(page, "suppressed").startswith("0 ")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#whatif").screenshot(path=str(SHOTS / "whatif.png"))
