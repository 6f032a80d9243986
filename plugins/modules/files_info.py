#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: files_info
short_description: Say whether paths exist and list the files under directories, in one task
version_added: 1.0.0
author:
  - gpushare.k8s maintainers (@gpushare)
description:
  - For each of O(paths), whether it exists, whether it is a directory, and for a directory every file under it
    (recursively, sorted; symbolic links are listed, not followed).
  - What M(ansible.builtin.stat) and M(ansible.builtin.find) would say together, for several paths in one task.
    Runs in the controller when the task's connection is local (one fork instead of two module processes), and as a
    module on any other connection.
extends_documentation_fragment:
  - gpushare.k8s.attributes
  - gpushare.k8s.attributes.info_module
options:
  paths:
    description: The paths to look at.
    type: list
    elements: path
    required: true
seealso:
  - module: ansible.builtin.stat
  - module: ansible.builtin.find
  - module: gpushare.k8s.files
"""

EXAMPLES = r"""
- name: List the files of the lab root and look for a manifest
  gpushare.k8s.files_info:
    paths:
      - ~/gpushare-lab
      - ~/gpushare-lab/k8s/mig-job.yaml
  register: lab_files
"""

RETURN = r"""
paths:
  description: One entry per path, in order.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The absolute path.
      type: str
    exists:
      description: Whether the path exists.
      type: bool
    isdir:
      description: Whether it is a directory.
      type: bool
    files:
      description: For a directory, the absolute paths of the files under it, sorted; empty otherwise.
      type: list
      elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpushare.k8s.plugins.module_utils.files import describe_paths


def main(module_class=AnsibleModule):
    module = module_class(
        argument_spec=dict(paths=dict(type="list", elements="path", required=True)),
        supports_check_mode=True,
    )
    try:
        found = describe_paths(module.params["paths"])
    except OSError as exc:
        module.fail_json(msg="reading the paths failed: %s" % exc, changed=False)
    module.exit_json(changed=False, paths=found)


if __name__ == "__main__":
    main()
