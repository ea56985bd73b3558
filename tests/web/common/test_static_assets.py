"""Static files as deployed: collectstatic names each after its content and WhiteNoise serves
it compressed with a cache of years; plotly is the cartesian partial bundle, not the full one."""

import re

import pytest
from django.core.management import call_command
from django.template import Context, Template
from django.test import override_settings

PRODUCTION_STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}


def test_production_storage_is_the_hashed_one():
    from anonweb import settings as production

    assert production.STORAGES["staticfiles"] == PRODUCTION_STORAGES["staticfiles"]


@pytest.fixture
def collected(tmp_path):
    with override_settings(
        STORAGES=PRODUCTION_STORAGES,
        STATIC_ROOT=tmp_path,
        WHITENOISE_USE_FINDERS=False,
        WHITENOISE_AUTOREFRESH=False,
        DEBUG=False,
    ):
        call_command("collectstatic", interactive=False, verbosity=0)
        yield tmp_path


def test_plotly_is_served_under_a_hashed_name_with_a_long_cache(collected, db):
    # (db: closing a response sends request_finished, which looks at the connections)
    from django.test import RequestFactory
    from whitenoise.middleware import WhiteNoiseMiddleware

    url = Template("{% load static %}{% static 'vendor/plotly/plotly-cartesian.min.js' %}").render(
        Context()
    )
    assert re.fullmatch(r"/static/vendor/plotly/plotly-cartesian\.min\.[0-9a-f]{12}\.js", url), url
    middleware = WhiteNoiseMiddleware(lambda request: None)
    request = RequestFactory().get(url, HTTP_ACCEPT_ENCODING="gzip")
    response = middleware(request)
    assert response.status_code == 200
    cache = response["Cache-Control"]
    assert "immutable" in cache
    assert int(re.search(r"max-age=(\d+)", cache).group(1)) >= 365 * 24 * 3600
    assert response["Content-Encoding"] == "gzip"
    body = b"".join(response.streaming_content)
    response.close()
    assert len(body) < 600_000  # the full bundle is 1.5 MB even compressed
    # the unhashed name is still served, but only for a minute
    plain = middleware(RequestFactory().get("/static/vendor/plotly/plotly-cartesian.min.js"))
    plain.close()
    assert "immutable" not in plain["Cache-Control"]


def test_the_vendored_bundle_is_the_official_cartesian_one_with_its_licence():
    from django.conf import settings

    path = settings.BASE_DIR / "static" / "vendor" / "plotly" / "plotly-cartesian.min.js"
    head = path.read_text(encoding="utf-8")[:300]
    assert "plotly.js (cartesian - minified) v4." in head and "MIT license" in head
    assert path.stat().st_size < 2_000_000


def test_plotly_bundle_matches_the_python_package_major_version():
    import importlib.util
    from pathlib import Path

    from django.conf import settings

    package = Path(importlib.util.find_spec("plotly").origin).parent / "package_data"
    full = (package / "plotly.min.js").read_text(encoding="utf-8")[:200]
    major = re.search(r"plotly\.js v(\d+)\.", full).group(1)
    vendored = (settings.BASE_DIR / "static/vendor/plotly/plotly-cartesian.min.js").read_text(
        encoding="utf-8"
    )[:200]
    assert re.search(r"minified\) v(\d+)\.", vendored).group(1) == major


# the trace modules of plotly.js-cartesian-dist-min (its README)
CARTESIAN_TRACES = {
    "bar",
    "box",
    "contour",
    "heatmap",
    "histogram",
    "histogram2d",
    "histogram2dcontour",
    "image",
    "pie",
    "scatter",
    "scatterternary",
    "violin",
}
NOT_TRACES = {"Figure", "Layout", "FigureWidget"}


def test_every_chart_uses_a_trace_the_vendored_bundle_draws():
    from django.conf import settings

    used = set()
    for path in (settings.BASE_DIR / "anonweb").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        used |= {t for t in re.findall(r"\bgo\.([A-Z][A-Za-z0-9]*)\(", text) if t not in NOT_TRACES}
    assert {"Bar", "Scatter"} <= used  # the scan finds the charts
    assert {t.lower() for t in used} <= CARTESIAN_TRACES, used
