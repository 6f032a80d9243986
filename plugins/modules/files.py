#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: files
short_description: Write several text files in one task, each only when it differs, and remove others
version_added: 1.0.0
author:
  - gpushare.k8s maintainers (@gpushare)
description:
  - Writes each of O(files) whose content or mode differs from what is on disk, creating missing directories;
    a file is written whole through a temporary file renamed over it, so a reader never sees half a file.
  - Removes each of O(absent) that exists (a file, a link, or a directory with everything under it).
  - Give O(files), O(absent) or both. Every entry is checked before the first write, so bad input writes nothing.
  - The lab writes its manifests and reports with it. Runs in the controller when the task's connection is local
    (one fork, where M(ansible.builtin.copy) costs two module processes per file), and as a module on any other
    connection.
extends_documentation_fragment:
  - gpushare.k8s.attributes
  - gpushare.k8s.attributes.idempotent
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  idempotent:
    support: full
options:
  files:
    description: The files to write.
    type: list
    elements: dict
    suboptions:
      dest:
        description: The file's path.
        type: path
        required: true
      content:
        description: What the file holds.
        type: str
        required: true
      mode:
        description: The file's mode, as a quoted octal string.
        type: str
        default: "0644"
  absent:
    description: Paths to remove, after O(files) are written; a path that does not exist is no change.
    type: list
    elements: path
  directory_mode:
    description: The mode of directories this task creates.
    type: str
    default: "0755"
seealso:
  - module: ansible.builtin.copy
"""

EXAMPLES = r"""
- name: Write a manifest and a report
  gpushare.k8s.files:
    files:
      - dest: ~/gpushare-lab/k8s/example.yaml
        content: "{{ manifest_text }}"
      - dest: ~/gpushare-lab/bin/check.sh
        content: "#!/bin/sh\necho ok\n"
        mode: "0755"

- name: Remove a report and a directory of old manifests
  gpushare.k8s.files:
    absent:
      - ~/gpushare-lab/out/old-report.txt
      - ~/gpushare-lab/k8s-old
"""

RETURN = r"""
files:
  description: One entry per file, in order.
  returned: always
  type: list
  elements: dict
  contains:
    dest:
      description: The file's absolute path.
      type: str
    changed:
      description: Whether the file was (or, in check mode, would be) written.
      type: bool
    mode:
      description: The file's mode.
      type: str
removed:
  description: One entry per path of O(absent), in order.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The absolute path.
      type: str
    changed:
      description: Whether it existed and was (or, in check mode, would be) removed.
      type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError
from ansible_collections.gpushare.k8s.plugins.module_utils.files import removal_targets, remove_paths, write_files


def main(module_class=AnsibleModule):
    module = module_class(
        argument_spec=dict(
            files=dict(type="list", elements="dict", options=dict(
                dest=dict(type="path", required=True),
                content=dict(type="str", required=True),
                mode=dict(type="str", default="0644"),
            )),
            absent=dict(type="list", elements="path"),
            directory_mode=dict(type="str", default="0755"),
        ),
        required_one_of=[("files", "absent")],
        supports_check_mode=True,
    )
    try:
        # both lists are checked before anything is written or removed
        removal_targets(module.params["absent"] or [])
        results = write_files(module.params["files"] or [], module.params["directory_mode"], check_mode=module.check_mode)
        removed = remove_paths(module.params["absent"] or [], check_mode=module.check_mode)
    except (InputError, OSError) as exc:
        module.fail_json(msg=str(exc), changed=False)
    diffs = [result.pop("diff") for result in results + removed]
    outcome = dict(changed=any(result["changed"] for result in results + removed), files=results, removed=removed)
    if module._diff:
        outcome["diff"] = [diff for diff, result in zip(diffs, results + removed) if result["changed"]]
    module.exit_json(**outcome)


if __name__ == "__main__":
    main()
