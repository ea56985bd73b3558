"""The release gate's findings on the attack figures: the team's policy may cap the excess
success of linkage, inference and singling out over the control, and the AUC of membership
inference. A release whose attacks ran without a control cannot be checked against a cap on
the excess: that is said, as a warning."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from anonweb.core.findings import BLOCK, WARN, Finding

# The codes of the findings below: what a gate replaces when the figures are measured again.
ATTACK_CODES = ("attack_no_control", "attack_excess", "attack_membership")


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def attack_findings(
    attacks: Mapping[str, Any] | None,
    *,
    max_excess: float | None,
    max_auc: float | None,
) -> list[Finding]:
    if not attacks or attacks.get("skipped") or (max_excess is None and max_auc is None):
        return []
    out: list[Finding] = []
    figures: list[tuple[str, tuple[str, ...], Mapping[str, Any]]] = [
        ("linkage", tuple(attacks.get("known") or ()), attacks["linkage"]),
        ("singling out", (), attacks["singling_out"]),
    ]
    figures += [(f"inference of {c}", (c,), r) for c, r in (attacks.get("inference") or {}).items()]
    if max_excess is not None:
        if attacks["linkage"].get("excess") is None:
            out.append(
                Finding(
                    "attack_no_control",
                    WARN,
                    "The policy caps the attacks' excess over chance at "
                    f"{_pct(max_excess)}, but no control was held out, so it cannot be "
                    'checked: add "attacks": {"holdout": 0.15} to the plan.',
                    facts={"max_attack_excess": max_excess},
                )
            )
        for name, columns, r in figures:
            excess = r.get("excess")
            if excess is not None and excess > max_excess:
                lo, hi = r["ci"]
                out.append(
                    Finding(
                        "attack_excess",
                        BLOCK,
                        f"The {name} attack succeeds {_pct(excess)} more often than chance "
                        f"(95% CI {_pct(lo)} to {_pct(hi)}), above the policy's "
                        f"{_pct(max_excess)}.",
                        columns=columns,
                        facts={
                            "attack": name,
                            "excess": excess,
                            "ci": [lo, hi],
                            "max_attack_excess": max_excess,
                        },
                    )
                )
    membership = attacks.get("membership") or {}
    auc = membership.get("auc")
    if max_auc is not None and auc is not None and auc > max_auc:
        lo, hi = membership["ci"]
        out.append(
            Finding(
                "attack_membership",
                BLOCK,
                f"The distance to the closest released record tells people in the release "
                f"from people not in it with an AUC of {auc:.2f} (95% CI {lo:.2f} to "
                f"{hi:.2f}), above the policy's {max_auc:.2f}.",
                facts={"auc": auc, "ci": [lo, hi], "max_membership_auc": max_auc},
            )
        )
    return out
