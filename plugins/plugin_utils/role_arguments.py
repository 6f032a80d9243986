# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Check the collection's roles' arguments against their ``meta/argument_specs.yml``, several roles at once.

What ansible-core's role argument validation does at the start of each role (the role's options read from the
variables, then ``ArgumentSpecValidator``), for a list of roles in one task: the action plugin
``gpushare.k8s.role_argument_check`` calls :func:`options` and :func:`errors` for each role before the first one
writes anything. Neither ansible-core nor this check passes the converted values on: a role reads its variables as
they are.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError

COLLECTION = "gpushare.k8s"
ROLES = Path(__file__).resolve().parents[2] / "roles"
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_SPECS = {}


def role_name(name):
    """The short name of one of this collection's roles, given ``placement`` or ``gpushare.k8s.placement``."""
    short = name[len(COLLECTION) + 1:] if name.startswith(COLLECTION + ".") else name
    if not short or "." in short or "/" in short or not (ROLES / short / "meta" / "argument_specs.yml").is_file():
        known = sorted(path.parent.parent.name for path in ROLES.glob("*/meta/argument_specs.yml"))
        raise InputError("roles", "%r is not a role of %s with an argument spec" % (name, COLLECTION),
                         "name one of %s" % ", ".join(known))
    return short


def options(name, entry_point="main"):
    """The options of role ``name``'s entry point ``entry_point`` (its argument spec's ``options``)."""
    short = role_name(name)
    key = (short, entry_point)
    if key not in _SPECS:
        with open(ROLES / short / "meta" / "argument_specs.yml", encoding="utf-8") as stream:
            specs = (yaml.load(stream, Loader=Loader) or {}).get("argument_specs") or {}
        if entry_point not in specs:
            raise InputError("entry_point", "role %s.%s has no entry point %r" % (COLLECTION, short, entry_point),
                             "name one of %s" % ", ".join(sorted(specs)))
        _SPECS[key] = specs[entry_point].get("options") or {}
    return _SPECS[key]


def errors(name, values, sources=None, entry_point="main"):
    """The argument-spec errors of role ``name`` given its variables ``values`` (templated), one line each.

    ``sources`` maps a variable to where its value came from (the play's template, say), added to its errors so
    that the line names the variable the user set.
    """
    short = role_name(name)
    result = ArgumentSpecValidator(options(short, entry_point)).validate(values)
    lines = []
    for message in result.error_messages:
        # "argument 'x' is of type ...", "value of x must be one of ...": the variable as a whole word either way
        named = [variable for variable in values if re.search(r"(?<![\w.])%s(?![\w.])" % re.escape(variable), message)]
        where = "".join(" (%s is %s)" % (variable, sources[variable]) for variable in named if variable in (sources or {}))
        lines.append("%s.%s: %s%s" % (COLLECTION, short, message, where))
    return lines
