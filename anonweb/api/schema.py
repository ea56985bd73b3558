"""The OpenAPI schema's bounds on whole numbers: every integer parameter in a path or a query
(an id, a dataset filter, a release to compare) without a stated maximum gets the 64-bit range
the API enforces (:data:`anonweb.api.pagination.MAX_ID`), so the schema says what is refused."""

from __future__ import annotations

from anonweb.api.pagination import MAX_ID


class IdConverter:
    """``<id:name>`` in a route: a whole number up to MAX_ID. A larger one matches no route (a
    JSON 404) instead of reaching the database, whose driver cannot hold it (a 500)."""

    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if number > MAX_ID:
            raise ValueError(f"{value} is past the largest id")
        return number

    def to_url(self, value: int) -> str:
        return str(value)


ID_SCHEMA = {"type": "integer", "minimum": 0, "maximum": MAX_ID}


def bound_integer_parameters(result, generator, request, public):
    """drf-spectacular post-processing hook (SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"])."""
    for item in result.get("paths", {}).values():
        for operation in item.values():
            if not isinstance(operation, dict):
                continue
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                if parameter.get("in") in ("path", "query") and schema.get("type") == "integer":
                    schema.setdefault("minimum", 0)
                    schema.setdefault("maximum", MAX_ID)
    return result
