"""``{% url %}`` for every template (settings: the engine's ``builtins``), its reversals
remembered.

Django's tag reverses on each rendering: about as much CPU as compiling a short query, once per
link, and a list links each row. A reversal depends only on the view's name, its arguments, the
current application, the script prefix, the URL configuration and the language, so the result
is kept under all of them (a bounded number of entries; forgotten when a setting changes). Only
plain names, integers and strings are kept: an object's text is whatever its ``__str__`` says
now, so a link built from one is reversed as Django does."""

from __future__ import annotations

import functools

from django import template
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.template.defaulttags import URLNode
from django.template.defaulttags import url as django_url
from django.urls import NoReverseMatch, get_script_prefix, get_urlconf, reverse
from django.utils import translation
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString

register = template.Library()
_PLAIN = (int, str, SafeString)


@functools.lru_cache(maxsize=8192)
def _reverse(view_name, args, kwargs, current_app, prefix, urlconf, language) -> str:
    # prefix, urlconf and language: what reverse() reads besides its arguments
    return reverse(view_name, args=args, kwargs=dict(kwargs), current_app=current_app)


@receiver(setting_changed)
def _forget(**kwargs):
    _reverse.cache_clear()


def _current_app(context):
    try:
        return context.request.current_app
    except AttributeError:
        try:
            return context.request.resolver_match.namespace
        except AttributeError:
            return None


class KeptURLNode(URLNode):
    def render(self, context):
        args = [arg.resolve(context) for arg in self.args]
        kwargs = {k: v.resolve(context) for k, v in self.kwargs.items()}
        view_name = self.view_name.resolve(context)
        current_app = _current_app(context)
        url = ""
        try:
            if (
                type(view_name) in _PLAIN
                and type(current_app) in (str, SafeString, type(None))
                and all(type(a) in _PLAIN for a in args)
                and all(type(v) in _PLAIN for v in kwargs.values())
            ):
                url = _reverse(
                    str(view_name),
                    tuple(args),
                    tuple(sorted(kwargs.items())),
                    current_app,
                    get_script_prefix(),
                    get_urlconf(),
                    translation.get_language(),
                )
            else:
                url = reverse(view_name, args=args, kwargs=kwargs, current_app=current_app)
        except NoReverseMatch:
            if self.asvar is None:
                raise
        if self.asvar:
            context[self.asvar] = url
            return ""
        return conditional_escape(url) if context.autoescape else url


@register.tag
def url(parser, token):
    node = django_url(parser, token)
    return KeptURLNode(node.view_name, node.args, node.kwargs, node.asvar)
