"""The privacy-model flags of the commands, one per flag the model registry declares
(:data:`anonweb.core.models.registry.MODELS`): ``--l-distinct SA=L``, ``--beta-likeness SA=B``,
... A model added to the registry gets its flag here without an edit."""

from __future__ import annotations

from django.core.management.base import CommandError

from anonweb.core.models.registry import cli_flags


def pairs(values, option):
    out = {}
    for raw in values or []:
        name, sep, value = raw.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise CommandError(f"{option} expects NAME=VALUE, got {raw!r}", returncode=2)
        out[name.strip()] = value.strip()
    return out


def add_model_flags(parser):
    """One flag per privacy-model flag the registry declares (``--l-distinct SA=L``, ...)."""
    options = {}
    for flag in cli_flags():
        if flag.per_column:
            parser.add_argument(flag.name, dest=flag.dest, action="append", help=flag.help)
        else:
            parser.add_argument(
                flag.name, dest=flag.dest, type=flag.value_type, default=None, help=flag.help
            )
        options.update({o.name: o for o in flag.options})
    for option in options.values():
        parser.add_argument(
            option.name, dest=option.dest, type=option.value_type, default=None, help=option.help
        )


def model_specs(opts):
    """The plan's "models" from the registry's flags, in the registry's order."""
    models = []
    for flag in cli_flags():
        given = opts.get(flag.dest)
        if given is None:
            continue
        if flag.per_column:
            specs = [flag.to_spec(sa, v) for sa, v in pairs(given, flag.name).items()]
        else:
            specs = [flag.to_spec(None, given)]
        for option in flag.options:
            if opts.get(option.dest) is not None:
                specs = [{**spec, option.key: opts[option.dest]} for spec in specs]
        models += specs
    return models
