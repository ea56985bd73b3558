"""The parameters of each privacy model in its JSON form (``{"model": "distinct_l", ...}``).

Each model class declares its own (``schema``); the registry (:mod:`.registry`) collects them.
This module keeps the names plans, forms and API documentation import."""

from __future__ import annotations

from anonweb.core.models.registry import MODEL_SCHEMA, MODEL_SCHEMAS

__all__ = ["MODEL_SCHEMA", "MODEL_SCHEMAS"]
