# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The collection's errors: one root, GpushareError, and the one shape of a bad-input error (the field, what is wrong
with it, and the fix). No Ansible import.

Every error the collection raises on purpose derives from GpushareError, so a caller tells "the collection refused or
could not do it, and says why" (``except GpushareError``) from a bug. The one exception is manifest_yaml.ManifestError:
that module also runs alone inside the installed bin/check-request.sh, where nothing else of the collection exists.
"""

from __future__ import annotations

__all__ = ["ApiCallError", "GpushareError", "InputError", "is_int"]


class GpushareError(Exception):
    """The root of every error the collection raises on purpose; its message says what failed and, where it can, the fix."""


class InputError(GpushareError, ValueError):
    """Bad input. ``str(error)`` is ``"<path>: <problem>. Fix: <fix>"``; each part is kept as an attribute."""

    def __init__(self, path, problem, fix):
        self.path = path
        self.problem = problem
        self.fix = fix
        self.message = "%s: %s. Fix: %s" % (path, problem, fix)
        super().__init__(self.message)


def is_int(value):
    """Whether ``value`` is a whole number as YAML gives one: an int, never a bool (``true`` is not 1 GPU)."""
    return isinstance(value, int) and not isinstance(value, bool)


class ApiCallError(GpushareError):
    """An API call failed. ``status`` is the HTTP status, ``None`` for a network error or a bad reply.

    ``timed_out`` says the API server accepted the connection but sent no answer within the request timeout:
    retrying at once would only wait again.
    """

    def __init__(self, status, message, retry_after=None, timed_out=False):
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after
        self.timed_out = timed_out

    def __str__(self):
        if self.status is None:
            return self.message
        return "HTTP {0}: {1}".format(self.status, self.message)
