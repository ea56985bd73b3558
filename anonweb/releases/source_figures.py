"""The files kept beside a release that hold figures computed from its source: they go when the
source is purged.

A release's own files (the published table) and its lineage (which source row each published
row is, the aggregates it published, the rows held out as the attacks' control) describe the
release, not the source, and stay: a later release of another upload of the same file is still
checked against them. What is measured on the source goes: the utility (the source's
distributions beside the release's), the attack figures of the latest on-demand run (which
records an attacker reconstructs, and their values) and the conflict findings' private detail
(the records and the values an attacker would infer)."""

from __future__ import annotations

from anonweb.releases.attacks import ON_DEMAND_FILE
from anonweb.releases.conflicts import FINDINGS_FILE
from anonweb.releases.models import Release
from anonweb.releases.storage import remove_private_file
from anonweb.releases.utility import UTILITY_FILE, utility_cache_forget

SOURCE_FIGURES_FILES = (UTILITY_FILE, ON_DEMAND_FILE, FINDINGS_FILE)


def release_source_figures_forget(*, dataset) -> int:
    """Remove the files of every release of ``dataset`` that hold figures computed from its
    source (:data:`SOURCE_FIGURES_FILES`): called when the source is purged, and again by
    each retention run for a purged source (a job that read the source before the purge may
    write its figures after it). Returns how many files went."""
    utility_cache_forget(dataset=dataset)
    removed = 0
    for key in Release.objects.filter(dataset=dataset).values_list("storage_key", flat=True):
        for name in SOURCE_FIGURES_FILES:
            removed += remove_private_file(key, name)
    return removed
