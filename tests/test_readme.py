"""The README's instructions work as written on another port: every variable `./run.sh` reads is
in its Configuration table, and the API examples name the address once."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def test_every_variable_run_sh_reads_is_in_the_configuration_table():
    read = set(re.findall(r"\$\{(ANONWEB_[A-Z_]+):-", (ROOT / "run.sh").read_text()))
    assert {"ANONWEB_HOST", "ANONWEB_PORT"} <= read
    table = _section("Configuration")
    missing = sorted(name for name in read if f"`{name}`" not in table)
    assert not missing, f"README's Configuration does not describe {missing}"


def test_the_curl_examples_name_the_address_once():
    """Moving to another port is one change: the examples derive from one BASE variable."""
    api = _section("API")
    curl_lines = [line for line in api.splitlines() if "curl " in line]
    assert curl_lines
    addresses = re.findall(r"https?://[\w.\-]+:\d+", api)
    assert addresses == ["http://127.0.0.1:8000"], addresses
    assert re.search(r"^BASE=http://127\.0\.0\.1:8000\b", api, re.M)
    assert "API=$BASE/api/v1" in api
    assert all(":8000" not in line for line in curl_lines)
