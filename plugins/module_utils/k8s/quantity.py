# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Kubernetes quantities (``8``, ``1k``, ``2000m``, ``2e0``, ``1Gi``): the collection's one reader.

The value is computed by the kubernetes client's own parser, ``kubernetes.utils.parse_quantity``. That
parser is more lenient than the API server: it takes whatever Python's ``Decimal`` takes before the
suffix (``NaN``, ``Infinity``, ``1_000``, blanks), a ``K`` suffix, an exponent followed by a suffix
(``1e3k``), and exponents of any size. So the text is first checked against the API server's grammar
(``resource.Quantity`` of k8s.io/apimachinery) and bounded in length and exponent; only then does the
client's parser read it, with enough decimal precision to be exact.

- :func:`parse_quantity`: a quantity as objects hold it (Node status, ResourceQuota), as a ``Decimal``.
- :func:`whole_units`: a count of an extended resource, read as the API server reads it: rounded up to
  the nano, then it must be whole, not negative and at most :data:`MAX_COUNT` (``1500m`` is refused).

No Ansible import, and no import of the whole kubernetes client: ``import kubernetes.utils`` loads every
API class first (about half a second), while the parser's own file needs only ``decimal``, so that file
is loaded by itself. ``bin/check-request.sh`` embeds this file; it needs the kubernetes package installed.
"""

from __future__ import annotations

import decimal
import importlib.util
import os
import re
import traceback
from decimal import ROUND_CEILING, Decimal

__all__ = ["HAS_PARSER", "MAX_COUNT", "PARSER_IMPORT_ERROR", "parse_quantity", "whole_units"]

# The largest count the API server holds exactly: it checks whole units on the milli-value, an int64.
MAX_COUNT = (2**63 - 1) // 1000
# The API server's grammar: <sign>?<digits>[.<digits>] then a binary SI suffix, a decimal SI suffix or e<int>.
_GRAMMAR = re.compile(r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE](?P<exponent>[+-]?[0-9]+)|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$")
_MAX_TEXT = 64
_MAX_EXPONENT = 100
_NANO = Decimal("1e-9")
# Exact arithmetic for any text within _MAX_TEXT and _MAX_EXPONENT (the default context keeps 28 digits).
_CONTEXT = decimal.Context(prec=_MAX_TEXT + 3 * _MAX_EXPONENT, Emax=10 * _MAX_EXPONENT, Emin=-10 * _MAX_EXPONENT)


def _client_parser():
    """``kubernetes.utils.parse_quantity``, from its own file when the package has the usual layout."""
    spec = importlib.util.find_spec("kubernetes")
    if spec is None:
        raise ImportError("No module named 'kubernetes'")
    for base in spec.submodule_search_locations or ():
        path = os.path.join(base, "utils", "quantity.py")
        if os.path.isfile(path):
            file_spec = importlib.util.spec_from_file_location("gpushare_kubernetes_quantity", path)
            module = importlib.util.module_from_spec(file_spec)
            file_spec.loader.exec_module(module)
            return module.parse_quantity
    from kubernetes.utils import parse_quantity as parser  # another layout: through the package

    return parser


try:
    _parse = _client_parser()
except Exception:  # pylint: disable=broad-exception-caught  # reported by the callers (missing_required_lib)
    _parse = None
    HAS_PARSER = False
    PARSER_IMPORT_ERROR = traceback.format_exc()
else:
    HAS_PARSER = True
    PARSER_IMPORT_ERROR = None


def _read(text):
    """``(Decimal, None)`` for a quantity string, or ``(None, why not)``."""
    text = text.strip()
    if len(text) > _MAX_TEXT:
        return None, "longer than %d characters, not a count the API server holds" % _MAX_TEXT
    match = _GRAMMAR.match(text)
    if not match:
        return None, "not a quantity (the API server refuses it)"
    exponent = match.group("exponent")
    if exponent is not None and abs(int(exponent)) > _MAX_EXPONENT:
        return None, "not a count the API server holds"
    if _parse is None:
        raise ImportError("reading a quantity needs the kubernetes Python library: %s" % PARSER_IMPORT_ERROR.strip().splitlines()[-1])
    try:
        with decimal.localcontext(_CONTEXT):
            return _parse(text), None
    except (ValueError, ArithmeticError):
        return None, "not a quantity (the API server refuses it)"


def parse_quantity(value):
    """Return a quantity (an int or a Kubernetes quantity string) as a ``Decimal``, or ``None`` if it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value)
    if not isinstance(value, str):
        return None
    return _read(value)[0]


def whole_units(text):
    """Read a quantity as the API server does for an extended resource: ``(count, None)`` or ``(None, why not)``.

    ``text`` is the quantity as sent (a JSON number's text or a string's content). ``"2000m"``,
    ``"2e0"``, ``"2.0"`` are 2; ``"1k"`` is 1000. Values are rounded up to the nano, as Kubernetes
    does; a value that is then not whole, negative or above :data:`MAX_COUNT` is refused.
    """
    value, why = _read(text)
    if value is None:
        return None, why
    if value < 0:
        return None, "negative (the API server refuses it)"
    with decimal.localcontext(_CONTEXT):
        if value.as_tuple().exponent < -9:
            value = value.quantize(_NANO, rounding=ROUND_CEILING)
        if value != value.to_integral_value():
            return None, "not a whole number (extended resources are requested in whole units)"
    if value > MAX_COUNT:
        return None, "larger than %d units (the API server cannot check it as a whole number)" % MAX_COUNT
    return int(value), None
