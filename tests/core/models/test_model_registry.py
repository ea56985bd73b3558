"""A privacy model is one class and one registry entry: a toy model registered from this module
reaches the plan's schema, the risk profile, the what-if, the comparison, the pages' figure
declarations, the policy form and the commands' flags, with no other file edited."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest

from anonweb.core import schema as sch
from anonweb.core.assessment.profile import assess_risk
from anonweb.core.errors import ParameterError
from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.models.base import HIGHER, CliFlag, Figure, PrivacyModel, cli_number
from anonweb.core.models.counts import ClassData
from anonweb.core.models.registry import MODEL_KINDS, MODELS, model_from_dict, registered
from anonweb.core.release.compare import sensitive_fields
from anonweb.core.release.plan import plan_from_dict, step_schemas
from anonweb.core.release.policy import PolicyThresholds
from anonweb.core.search.whatif import WhatIfTable


def rarest(data: ClassData, column: str) -> Any:
    """Records holding each class's rarest sensitive value."""
    sc = data.sensitive(column)
    out = np.full(sc.n_classes, np.iinfo(np.int64).max)
    np.minimum.at(out, sc.cls, sc.cnt.astype(np.int64))
    return out


@dataclass(frozen=True)
class RarestValue(PrivacyModel):
    """Toy model: each sensitive value a class holds, it holds at least ``count`` times."""

    sensitive: str
    count: int
    kind = "toy_rarest"
    monotonic = False
    schema = sch.obj(
        {
            "sensitive": sch.column("The sensitive column"),
            "count": sch.integer("Fewest records per value in a class", minimum=1),
        },
        required=["sensitive", "count"],
        title="Rarest value",
    )
    figures = (Figure("toy_rarest", "rarest value's records", HIGHER, measure=rarest),)
    cli_flags = (
        CliFlag(
            "--toy-rarest",
            "SA=N",
            lambda col, v: {
                "model": "toy_rarest",
                "sensitive": col,
                "count": cli_number(v, "--toy-rarest", int),
            },
        ),
    )

    def describe(self) -> str:
        return f"at least {self.count} records per value of {self.sensitive}"

    def measure(self, data: ClassData) -> Any:
        return rarest(data, self.sensitive)

    def passes(self, data: ClassData) -> Any:
        return self.measure(data) >= self.count


# classes a (flu 2, cold 1) and b (flu 2, cold 2): rarest 1 and 2
DF = pd.DataFrame(
    {
        "zip": ["a", "a", "a", "b", "b", "b", "b"],
        "disease": ["flu", "flu", "cold", "flu", "flu", "cold", "cold"],
    }
)
SPEC = {"model": "toy_rarest", "sensitive": "disease", "count": 2}
PLAN = {
    "quasi_identifiers": ["zip"],
    "sensitive": ["disease"],
    "hierarchies": {"zip": {"builder": "mask"}},
    "steps": [{"kind": "optimal_generalization", "params": {"k": 1, "models": [SPEC]}}],
}


@pytest.fixture
def toy():
    with registered(RarestValue) as cls:
        yield cls
    assert "toy_rarest" not in MODEL_KINDS and RarestValue not in MODELS


def _plan_kinds() -> list[str]:
    schema = step_schemas()["steps"]["optimal_generalization"]["schema"]
    return [
        v["properties"]["model"]["const"] for v in schema["properties"]["models"]["items"]["oneOf"]
    ]


def test_the_plan_schema_and_the_plan_accept_it(toy):
    assert "toy_rarest" in _plan_kinds()
    assert model_from_dict(SPEC) == RarestValue("disease", 2)
    plan_from_dict(PLAN)  # validated against the schema and by the model itself


def test_unregistered_it_is_gone():
    assert "toy_rarest" not in _plan_kinds()
    with pytest.raises(ParameterError):
        model_from_dict(SPEC)


def test_the_risk_profile_measures_it(toy):
    profile = assess_risk(DF, quasi_identifiers=["zip"], sensitive=["disease"])
    figures = profile.to_dict(per_class=True)["sensitive"]["disease"]
    assert figures["toy_rarest"] == 1
    assert sorted(figures["per_class"]["toy_rarest"]) == [1, 2]


def test_the_what_if_measures_and_checks_it(toy):
    zip_h = Hierarchy(rows=(("a", "*"), ("b", "*")), attribute="zip")
    table = WhatIfTable(
        DF, quasi_identifiers=["zip"], hierarchies={"zip": zip_h}, sensitive=["disease"]
    )
    node = table.evaluate({"zip": 0}, models=[RarestValue("disease", 2)]).to_dict()
    assert node["sensitive"]["disease"]["toy_rarest"] == 1
    assert node["satisfied"] is False and node["required_suppression"] == 3
    top = table.evaluate({"zip": 1}, models=[RarestValue("disease", 2)]).to_dict()
    assert top["sensitive"]["disease"]["toy_rarest"] == 3 and top["satisfied"] is True


def test_the_comparison_and_the_pages_declare_it(toy):
    from anonweb.common.templatetags.model_figures import figure_value, other_figures

    assert ("toy_rarest", "rarest value's records", HIGHER) in sensitive_fields()
    declared = next(f for f in other_figures() if f["key"] == "toy_rarest")
    assert declared["label"] == "rarest value's records" and declared["safer"] == HIGHER
    assert figure_value({"toy_rarest": 3}, declared) == "3"
    assert figure_value({}, declared) == "—"


def test_the_commands_have_its_flag(toy):
    from anonweb.cli.management.commands.anonymize import Command as Anonymize
    from anonweb.cli.management.commands.assess import Command as Assess
    from anonweb.cli.model_flags import model_specs

    for command in (Anonymize(), Assess()):
        parser = command.create_parser("manage.py", "x")
        required = ["--out", "o.csv"] if isinstance(command, Anonymize) else []
        opts = vars(parser.parse_args(["t.csv", *required, "--toy-rarest", "disease=2"]))
        assert model_specs(opts) == [SPEC]
    with pytest.raises(ParameterError, match="--toy-rarest"):
        model_specs({"toy_rarest": ["disease=two"]})


def test_the_policy_takes_it(toy):
    from anonweb.releases.views import PolicyForm

    policy = PolicyThresholds(
        models=[{"model": "k_anonymity", "k": 2}, {"model": "toy_rarest", "count": 2}]
    )
    assert policy.to_dict()["models"][1] == {"model": "toy_rarest", "count": 2}
    form = PolicyForm({"k": 2, "l": 1, "max_prosecutor_risk": 0.5, "toy_rarest__count": 3})
    assert form.is_valid(), form.errors
    made = form.thresholds(PolicyThresholds())
    assert {"model": "toy_rarest", "count": 3} in made.models
