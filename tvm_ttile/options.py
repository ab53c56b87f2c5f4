"""Options declared as data, checked once. Every plug-in family (samplers, strategies, rankers, neighbourhood
searches) declares its options as {name: (default, help)}; `resolve` is the one checker of what a caller gives,
and `help_lines` the one writer of their help (the CLI's and the docs')."""
from __future__ import annotations

from .errors import TTileError


def as_type_of(default, value, name: str, owner: str):
    """An option's value converted to its default's type (the command line gives strings and integers);
    `owner` names whose option it is in the error ("sampler 'ttile'", "strategy 'model'")."""
    kind = type(default)
    try:
        if (kind is bool) != isinstance(value, bool):  # True is no count, 1 no switch
            raise ValueError
        if kind is bool:
            return value
        if kind is int:
            number = float(value)
            if not number.is_integer():  # int() would quietly truncate 32.5 to 32
                raise ValueError
            return int(number)
        return kind(value)
    except (TypeError, ValueError, OverflowError):
        raise TTileError(f"{owner} option {name!r} takes a value of type {kind.__name__}, got {value!r}") from None


def resolve(declared: dict, given: dict, owner: str) -> dict:
    """Every declared option with its given value (or its default), converted to the default's type; an unknown
    name is refused in one line that names `owner` and the options it has."""
    unknown = set(given) - set(declared)
    if unknown:
        raise TTileError(f"{owner} has no option(s) {sorted(unknown)}; it has {sorted(declared)}")
    return {k: as_type_of(default, given.get(k, default), k, owner) for k, (default, _) in declared.items()}


def check_share(options: dict, name: str, owner: str) -> None:
    """Refuse an option that is a share of draws or trials outside [0, 1]."""
    if not 0 <= options[name] <= 1:
        raise TTileError(f"{owner} option {name!r} is a share in [0, 1], got {options[name]}")


def check_choice(options: dict, name: str, choices, owner: str) -> None:
    """Refuse an option whose value is none of `choices`."""
    if options[name] not in choices:
        raise TTileError(f"{owner} option {name!r} is one of {', '.join(map(str, choices))}; got {options[name]!r}")


def summary(declared: dict) -> str:
    """The declared options and their defaults in one line: "name=default, ..."."""
    return ", ".join(f"{name}={str(default).lower() if isinstance(default, bool) else default}"
                     for name, (default, _) in declared.items())


def help_lines(declared: dict) -> list:
    """One line per declared option: "name (default D): help"."""
    return [f"{name} (default {default!r}): {text}" for name, (default, text) in declared.items()]
