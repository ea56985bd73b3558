"""The scripted ledger sequence runs end to end on a fresh SQLite database and leaves the ledger
the rules say: two central releases and a local-DP release spent, the over-budget launch refused,
the cancelled job refunded."""

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.slow
def test_the_ledger_sequence_script():
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SECRET_KEY")}
    proc = subprocess.run(
        [sys.executable, "scripts/ledger_sequence.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert out.count(": succeeded") == 3
    assert "refused: this plan spends ε = 1, but only ε = 0.5 of the budget ε = 3 remains" in out
    final = out.split("-- ledger after: the cancelled job")[1]
    assert "spent ε = 2.5000" in final and "remaining ε = 0.5000" in final
    assert "cancelled  refunded  ε = 0.4000" in final
    assert "(central 0.0000, local 0.5000)" in final
