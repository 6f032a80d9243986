# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The one shape of a bad-input error: the field, what is wrong with it, and the fix. No Ansible import."""

from __future__ import annotations

__all__ = ["ApiCallError", "InputError", "is_int"]


class InputError(ValueError):
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


class ApiCallError(Exception):
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
