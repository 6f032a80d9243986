#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: role_argument_check
short_description: Check several of the collection's roles' arguments against their argument specs, in one task
version_added: 1.0.0
author:
  - gpushare.k8s maintainers (@gpushare)
description:
  - For each role of O(roles), reads the role's options from the play's variables and checks them against the role's
    C(meta/argument_specs.yml), as ansible-core does at the start of each role; reports every error of every role at
    once, each naming the role, the variable and, when the play sets the variable from a template, that template.
  - The lab playbook calls it once, before step 1, and imports those roles with O(ansible.builtin.import_role#module:rolespec_validate=false)
    (the configure-only playbook C(gpu_sharing.yml) does the same for its role).
    So a bad argument of step 8 is refused before step 1 writes anything, and the run spends one task on the checks
    instead of one per role. Roles imported any other way keep ansible-core's own check.
  - An action that runs in the controller; it reads the variables and the collection's files, and changes nothing.
extends_documentation_fragment:
  - gpushare.k8s.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
options:
  roles:
    description:
      - This collection's roles to check, by name (V(placement) or V(gpushare.k8s.placement)). Each must have an argument spec.
    type: list
    elements: str
    required: true
  entry_point:
    description: The entry point of each role whose options are checked.
    type: str
    default: main
notes:
  - The values are checked, not converted. As with ansible-core's check, each role reads its variables as they are.
seealso:
  - module: ansible.builtin.validate_argument_spec
  - module: ansible.builtin.import_role
"""

EXAMPLES = r"""
- name: Check the arguments of the steps below before any of them runs
  gpushare.k8s.role_argument_check:
    roles: [namespaces, team_quota, placement]

- name: Step 8, its arguments already checked
  ansible.builtin.import_role:
    name: gpushare.k8s.placement
    rolespec_validate: false
"""

RETURN = r"""
roles:
  description: The roles checked, by short name.
  returned: always
  type: list
  elements: str
  sample: [namespaces, team_quota, placement]
argument_errors:
  description: One line per error, each starting with the role's fully qualified name.
  returned: failed
  type: list
  elements: str
  sample:
    - "gpushare.k8s.quota_coverage: argument 'quota_coverage_namespaces' is of type dict and we were unable to convert to list"
"""
