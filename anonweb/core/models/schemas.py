"""The parameters of each privacy model in its JSON form (``{"model": "distinct_l", ...}``),
declared once for plans, forms and API documentation; :func:`model_from_dict` builds the model
object and checks what a schema cannot say."""

from __future__ import annotations

from anonweb.core import schema as sch

_SENSITIVE = sch.column("The sensitive column the model protects")
_T_DISTANCES = ("equal", "ordered", "hierarchical")

MODEL_SCHEMAS: dict[str, sch.Schema] = {
    "k_anonymity": sch.obj(
        {"k": sch.integer("Smallest class size", minimum=1, maximum=sch.MAX_K)},
        required=["k"],
        labels={
            "k": "Smallest class size (k)",
        },
        title="k-anonymity",
    ),
    "distinct_l": sch.obj(
        {
            "sensitive": _SENSITIVE,
            "l": sch.integer("Distinct sensitive values per class", minimum=1, maximum=10_000),
        },
        required=["sensitive", "l"],
        labels={
            "sensitive": "Sensitive column",
            "l": "Different values per class (l)",
        },
        title="Distinct l-diversity",
    ),
    "entropy_l": sch.obj(
        {
            "sensitive": _SENSITIVE,
            "l": sch.number(
                "exp(entropy) of each class's sensitive values", minimum=1, maximum=10_000
            ),
        },
        required=["sensitive", "l"],
        labels={
            "sensitive": "Sensitive column",
            "l": "Entropy l",
        },
        title="Entropy l-diversity",
    ),
    "recursive_cl": sch.obj(
        {
            "sensitive": _SENSITIVE,
            "c": sch.number(
                "The most frequent value is rarer than c times the l-th and later ones",
                exclusive_minimum=0,
                maximum=1e6,
            ),
            "l": sch.integer("l", minimum=1, maximum=10_000),
        },
        required=["sensitive", "c", "l"],
        labels={
            "sensitive": "Sensitive column",
            "c": "c",
            "l": "l",
        },
        title="Recursive (c,l)-diversity",
    ),
    "t_closeness": sch.obj(
        {
            "sensitive": _SENSITIVE,
            "t": sch.number(
                "Largest distance between a class's and the table's distribution",
                minimum=0,
                maximum=1,
            ),
            "distance": sch.string(
                "Earth mover's distance over", enum=_T_DISTANCES, default="equal"
            ),
        },
        required=["sensitive", "t"],
        labels={
            "sensitive": "Sensitive column",
            "t": "Largest distance (t)",
            "distance": "Distance",
        },
        title="t-closeness",
    ),
    "delta_disclosure": sch.obj(
        {
            "sensitive": _SENSITIVE,
            "delta": sch.number(
                "Bound on |log2 p(value | class) / p(value)|", exclusive_minimum=0, maximum=1000
            ),
        },
        required=["sensitive", "delta"],
        labels={
            "sensitive": "Sensitive column",
            "delta": "δ",
        },
        title="δ-disclosure privacy",
    ),
    "average_risk": sch.obj(
        {
            "threshold": sch.number(
                "Ceiling on the average re-identification risk", exclusive_minimum=0, maximum=1
            )
        },
        required=["threshold"],
        labels={
            "threshold": "Highest average risk",
        },
        title="Average re-identification risk",
    ),
}

MODEL_SCHEMA = sch.variants("model", MODEL_SCHEMAS, "A privacy model the search enforces")
