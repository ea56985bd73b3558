"""The API's JSON parser: DRF's, with the nesting depth bounded before ``json.loads`` recurses
(:mod:`anonweb.core.io.jsontext`), so a body of a thousand brackets is a 400, not a 500."""

from __future__ import annotations

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from anonweb.core.errors import ParameterError
from anonweb.core.io.jsontext import json_loads


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        raw = stream.read() if stream is not None else b""
        try:
            text = raw.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            raise ParseError(f"the request body is not {encoding} text") from None
        try:
            return json_loads(text, what="the request body")
        except ParameterError as exc:
            raise ParseError(str(exc)) from None
