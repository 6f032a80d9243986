# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpushare.k8s maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the collection's waiting modules change in C(kubernetes.core.k8s_wait_options).

List it before that fragment: of two fragments documenting one option, the first one's keys are kept.
"""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  wait_sleep:
    description:
      - Seconds to sleep between checks. Fractions of a second are allowed, where M(kubernetes.core.k8s) takes whole
        seconds; the lab's roles check every 0.2 s for Pods to bind.
    type: float
    default: 5
"""
