# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The request check's command line, ``check-request <pod-manifest>`` (the lab's ``bin/check-request.sh``).

Runs on its own next to :mod:`manifest_yaml`, :mod:`gpu_requests` and :mod:`quantity` (no Ansible; PyYAML and
the kubernetes package's quantity parser)::

    python3 check_request.py <pod-manifest> [--resource NAME]... [--max N] [--claim-limit CLASS[:CAPACITY=QUANTITY]]...
        [--intents JSON]

Exit codes are the contract:

- 0 and ``OK``: every document was read as kubectl reads it and no container asks for more than
  N units (a file without workloads included);
- 1 and one ``OVER=<container>=<count>`` line per container asking for more; with ``--claim-limit``, also one
  ``OVER=<claim>/<request>=<shares>`` line per ResourceClaim (or template) request asking for more than N shares
  of that shared device class (``--claim-limit shared.gpu.nvidia.com:memory=20Gi``: a request of 40Gi is 2 shares);
- with ``--intents`` (what each GPU intent becomes on the cluster: the JSON map the intent policies carry), one
  ``INTENT=<workload>=<intent> -> <what it becomes>`` line per Pod or Pod template asking by the annotation
  ``gpushare.k8s/gpu``, before the verdict; the containers it names are checked as if they asked for that resource;
  1 and a ``REFUSED=<workload>=<reason>`` line for each one admission will refuse (an intent no pool gives, a bad
  count, more than the intent gives a container);
- 2 and a message on standard error for everything else: the file cannot be read, is not valid
  YAML, uses a construct kubectl reads differently or refuses (tags, repeated keys, excessive
  aliasing, ...), holds a count that is not a whole number of units, or the options are
  wrong. ``--help`` prints the usage and exits 2 too: it checked nothing. An internal error (a failure of the check
  itself, even while printing) exits 2 as well, never 1.

What is printed comes from the manifest (names, keys), so it is escaped: characters that are not printable (line
breaks, terminal escapes, bidirectional controls) are written as Python escapes (``\\n``, ``\\x1b``, ``\\u202e``), and
characters the output stream cannot encode (a euro sign under ``PYTHONIOENCODING=ascii``) as ``\\u20ac``; one line of
output is always one line, whatever a name holds.
"""

from __future__ import annotations

import argparse
import json
import sys

try:
    from .gpu_requests import DEFAULT_RESOURCES, ManifestError, check_claim_limits, check_intents, check_manifest, check_options, read_manifest
    from ..k8s.quantity import HAS_PARSER, PARSER_IMPORT_ERROR
except ImportError:  # run as a script next to gpu_requests.py, manifest_yaml.py and quantity.py (bin/check-request.sh)
    from gpu_requests import (  # type: ignore[no-redef]
        DEFAULT_RESOURCES, ManifestError, check_claim_limits, check_intents, check_manifest, check_options, read_manifest)
    from quantity import HAS_PARSER, PARSER_IMPORT_ERROR  # type: ignore[no-redef]


__all__ = ["main"]

EXIT_OK = 0
EXIT_OVER = 1
EXIT_ERROR = 2


class _Parser(argparse.ArgumentParser):
    """argparse whose every exit (errors and --help) is exit 2: only a completed check exits 0 or 1."""

    def exit(self, status=0, message=None):
        if message:
            self._print_message(message, sys.stderr)
        raise _Exit()

    def _print_message(self, message, file=None):
        if message:
            _write(file or sys.stderr, message)

    def print_help(self, file=None):
        super().print_help(sys.stderr)


class _Exit(Exception):
    """argparse finished (usage error or --help)."""


def _read_file(path):
    if path == "-":
        stream = getattr(sys.stdin, "buffer", sys.stdin)
        return read_manifest(stream)
    with open(path, "rb") as handle:
        return read_manifest(handle)


def _write(stream, text):
    """Write ``text`` as ``stream`` can encode it: what it cannot is written as a backslash escape."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except LookupError:  # an encoding Python does not know: plain ASCII is safe anywhere
        text = text.encode("ascii", "backslashreplace").decode("ascii")
    except UnicodeEncodeError:
        text = text.encode(encoding, "backslashreplace").decode(encoding)
    stream.write(text)


def _printable(text):
    """``text`` with every character that is not printable (line breaks, terminal escapes, bidi controls) escaped."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode("ascii") for char in text)


def _say(stream, line):
    """One line of output, escaped: a name read from the manifest can neither break the line nor the output stream."""
    _write(stream, _printable(line) + "\n")


def _claim_limits(values):
    """``CLASS[:CAPACITY=QUANTITY]`` options as ``{class: {capacity: quantity}}`` (ValueError naming the bad one)."""
    limits = {}
    for value in values or ():
        device_class, _sep, rest = value.partition(":")
        limits.setdefault(device_class, {})
        if rest:
            capacity, equals, quantity = rest.partition("=")
            if not equals or not capacity or not quantity:
                raise ValueError("--claim-limit %s: write CLASS or CLASS:CAPACITY=QUANTITY, e.g. shared.gpu.nvidia.com:memory=20Gi" % value)
            limits[device_class][capacity] = quantity
    return check_claim_limits(limits)


def _becomes(entry):
    """What admission makes of one Pod (template) asking by intent, in words."""
    if entry["form"] == "unchanged":
        return "unchanged (it names a GPU itself)"
    if entry["refused"]:
        return "refused"
    if entry["form"] == "claim":
        return "a claim on device class %s for %s" % (entry["resource"], ", ".join(entry["containers"]) or "no container")
    return "%s: %s for %s" % (entry["resource"], entry["count"], ", ".join(entry["containers"]) or "no container (gpu-containers names none)")


def main(argv=None):
    """``check-request <pod-manifest>``: exit 0 and ``OK``, exit 1 and ``OVER=<container>=<count>`` lines, or exit 2.

    Never raises: exit 1 means "too many GPUs", so any failure of the check itself (printing included) exits 2.
    """
    try:
        return _main(argv)
    except Exception as exc:  # pylint: disable=broad-exception-caught
        try:
            _say(sys.stderr, "check-request: internal error, the check did not complete: %s: %s" % (type(exc).__name__, exc))
        except Exception:  # pylint: disable=broad-exception-caught
            pass  # standard error itself is gone: the exit code still says it
        return EXIT_ERROR


def _main(argv):
    parser = _Parser(
        prog="check-request",
        description="Reject GPU requests larger than one slice before deploying. Reads the manifest as kubectl does "
        "(or refuses it) and prints OVER=<container>=<count> per container asking for too much (exit 1) or OK (exit 0).",
        epilog="Exit 2, with a message on standard error, when nothing was checked: unreadable file, invalid YAML, "
        "a construct kubectl reads differently or refuses (tags, repeated keys, excessive aliasing), a count that is "
        "not a whole number of units, a bad option, or --help.",
    )
    parser.add_argument("manifest", help="manifest file with one or more YAML documents ('-' reads standard input)")
    parser.add_argument("--resource", action="append", dest="resources", metavar="NAME", help="resource to check (repeatable; default nvidia.com/gpu)")
    parser.add_argument("--max", type=int, default=1, dest="max_per_container", metavar="N", help="most units one container may ask for (default 1)")
    parser.add_argument("--claim-limit", action="append", dest="claim_limits", metavar="CLASS[:CAPACITY=QUANTITY]",
                        help="a shared device class whose claim requests are counted in shares of QUANTITY (repeatable)")
    parser.add_argument("--intents", metavar="JSON", help="what each GPU intent becomes on the cluster (the map the intent policies carry)")
    try:
        args = parser.parse_args(argv)
    except _Exit:
        return EXIT_ERROR
    if not HAS_PARSER:
        _say(sys.stderr, "check-request: counts are read by the kubernetes package's quantity parser, which %s cannot import (%s); "
             "install kubernetes (pip install kubernetes), nothing was checked" % (sys.executable, PARSER_IMPORT_ERROR.strip().splitlines()[-1]))
        return EXIT_ERROR
    try:
        resources, max_per_container = check_options(args.resources or DEFAULT_RESOURCES, args.max_per_container)
        claim_limits = _claim_limits(args.claim_limits)
        intents = check_intents(json.loads(args.intents)) if args.intents is not None else None
    except ValueError as exc:
        _say(sys.stderr, "check-request: %s" % exc)
        return EXIT_ERROR
    try:
        result = check_manifest(_read_file(args.manifest), resources=resources, max_per_container=max_per_container,
                                claim_limits=claim_limits, intents=intents)
    except OSError as exc:
        _say(sys.stderr, "check-request: cannot read %s: %s" % (args.manifest, exc.strerror or exc))
        return EXIT_ERROR
    except ManifestError as exc:
        _say(sys.stderr, "check-request: %s: %s" % (args.manifest, exc))
        return EXIT_ERROR
    except Exception as exc:  # pylint: disable=broad-exception-caught
        # Exit 1 means "too many GPUs": an unexpected failure must never look like that.
        _say(sys.stderr, "check-request: %s: internal error, nothing was checked: %s: %s" % (args.manifest, type(exc).__name__, exc))
        return EXIT_ERROR
    refused = False
    for entry in result["intents"]:
        _say(sys.stdout, "INTENT=%s=%s -> %s" % (entry["name"], entry["intent"], _becomes(entry)))
    for entry in result["intents"]:
        if entry["refused"]:
            refused = True
            _say(sys.stdout, "REFUSED=%s=%s" % (entry["name"], entry["refused"]))
    if result["offenders"] or refused:
        for offender in result["offenders"]:
            _say(sys.stdout, "OVER=%s=%s" % (offender["container"], offender["count"]))
        sys.stdout.flush()  # inside the guard of main: output that cannot be written is an error, not a verdict
        return EXIT_OVER
    _say(sys.stdout, "OK")
    sys.stdout.flush()
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
