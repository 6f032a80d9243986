# -*- coding: utf-8 -*-
# Copyright: (c) 2025, gpushare.k8s maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Attribute descriptions shared by the collection's modules.

A module extends ``gpushare.k8s.attributes`` for check_mode and diff_mode and
adds the extra fragments that apply (``.idempotent``, ``.info_module``), then
sets ``support`` (and ``details`` where useful) in its own ``attributes:``.
"""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run with C(--check), reporting what would change without changing anything.
  diff_mode:
    description: With C(--diff), returns what changed (or, in check mode, what would change).
"""

    IDEMPOTENT = r"""
options: {}
attributes:
  idempotent:
    description:
      - Running the module again with the same options reports no change once the first run succeeded,
        unless something else changed the target in between.
"""

    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This module only reads, so it behaves the same in check mode.
  diff_mode:
    support: N/A
    details:
      - This module only reads and never reports a diff.
"""
