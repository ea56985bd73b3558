"""Attack-based disclosure risk: what an attacker actually gets from one release.

Formal figures (k, l, t, ε) say what a model guarantees; these say what the attacks of the
Article 29 Working Party's Opinion 05/2014 achieve on this release, each as a success rate
against a control: the same attack on people who are *not* in the release, so the excess is
what the release gave away beyond what the attacker would guess about anyone of the
population. Written from the papers (Cohen and Nissim for singling out; nearest-record linkage
as in the permutation model's intruder; distance to closest record for membership).

:func:`run_attacks` is the entry point; :mod:`.reconstruction` attacks several releases
together.
"""
