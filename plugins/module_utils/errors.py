# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The one shape of a bad-input error: the field, what is wrong with it, and the fix. No Ansible import."""

from __future__ import annotations

__all__ = ["InputError"]


class InputError(ValueError):
    """Bad input. ``str(error)`` is ``"<path>: <problem>. Fix: <fix>"``; each part is kept as an attribute."""

    def __init__(self, path, problem, fix):
        self.path = path
        self.problem = problem
        self.fix = fix
        self.message = "%s: %s. Fix: %s" % (path, problem, fix)
        super().__init__(self.message)
