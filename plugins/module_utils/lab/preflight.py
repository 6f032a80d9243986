# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The lab's checks that run before anything is written: bad input fails with the field and the fix, and nothing changes.
(A manifest's own checks are the Kubernetes layer's: ``k8s/manifest_checks.py``.)

- :func:`missing_node_errors` names the nodes of an inventory the cluster does not have.
- :func:`quota_shrink_errors` refuses to lower a ResourceQuota below what is already in use:
  the API server accepts such a quota, keeps the admitted Pods and refuses every new one.

Pure Python (PyYAML only), so it is unit-tested outside Ansible.
"""

from __future__ import annotations

import json

from ..k8s.quantity import parse_quantity


__all__ = ["missing_node_errors", "quota_shrink_errors", "team_fill_errors"]


def _name(item):
    """A node's name from a name, an inventory entry ``{name}`` or a Node object ``{metadata: {name}}``."""
    if isinstance(item, dict):
        item = (item.get("metadata") or {}).get("name") if isinstance(item.get("metadata"), dict) else item.get("name")
    return item if isinstance(item, str) and item else None


def _names(items):
    return [name for name in (_name(item) for item in items or []) if name]


def missing_node_errors(wanted, existing, field="nodes"):
    """``[message]`` naming the nodes of ``wanted`` (names or ``{name}`` entries) not among ``existing`` (Node objects or names).

    Empty when every node exists.
    """
    have = set(_names(existing))
    missing = [name for name in dict.fromkeys(_names(wanted)) if name not in have]
    if not missing:
        return []
    return [
        "%s: node%s %s do%s not exist in the cluster (it has %s). Fix: create %s (playbooks/cluster.yml creates the lab cluster's "
        "nodes) or remove %s from %s; nothing was written"
        % (
            field,
            "s" if len(missing) > 1 else "",
            ", ".join(missing),
            "" if len(missing) > 1 else "es",
            ", ".join(sorted(have)) or "no nodes",
            "them" if len(missing) > 1 else "it",
            "them" if len(missing) > 1 else "it",
            field,
        )
    ]


def team_fill_errors(gpus, pods, over_pod, gpus_field="gpus", pods_field="pods", gpus_fix="gpus"):
    """``[message]`` when the team's quota ``gpus`` is not a whole number of 1 or more, or its ``pods`` do not fill it exactly.

    Each team Pod asks for one unit, so the team must fill its quota exactly for ``over_pod`` to be the Pod the API server
    refuses: with fewer Pods it would be admitted, with more a team Pod would be refused. ``gpus_field`` and ``pods_field``
    name the settings in the messages, ``gpus_fix`` the setting the fix changes.
    """
    if not (isinstance(gpus, int) and not isinstance(gpus, bool) and gpus >= 1):
        return ["%s: %s is not a whole number of 1 or more. Fix: set the GPU slots the team may request, e.g. %s: 2."
                % (gpus_field, json.dumps(gpus), gpus_fix)]
    if not isinstance(pods, (list, tuple)):
        raise ValueError("%s: must be a list of Pods ({name}), got %s" % (pods_field, type(pods).__name__))
    team = len(pods)
    if team == gpus:
        return []
    return ["%s: %d Pods of one unit each, but %s is %d: the team must fill its quota exactly so that %s is the Pod it refuses "
            "(with fewer Pods it would be admitted, with more a team Pod would be refused). Fix: list %d team Pods, or set %s: %d."
            % (pods_field, team, gpus_field, gpus, over_pod, gpus, gpus_fix, team)]


def _show(number):
    return str(int(number)) if number == number.to_integral_value() else str(number.normalize())


def quota_shrink_errors(quota, hard, option="hard", allow_option="allow_shrink"):
    """``[message]`` per key of ``hard`` that would be set below what ``quota`` (the live ResourceQuota) already uses.

    ``quota`` is the ResourceQuota as the API returns it (``None`` or ``{}`` when it does not exist yet);
    ``hard`` maps quota keys (``requests.nvidia.com/gpu``) to the new limits. ``option`` names the setting
    that gave the limit and ``allow_option`` the setting that allows lowering it anyway, for the messages.
    """
    if not isinstance(hard, dict):
        raise ValueError("hard must be a mapping of quota key to limit, e.g. {'requests.nvidia.com/gpu': 2}")
    quota = quota or {}
    metadata = quota.get("metadata") or {}
    used = (quota.get("status") or {}).get("used") or {}
    current = (quota.get("status") or {}).get("hard") or (quota.get("spec") or {}).get("hard") or {}
    where = "%s/%s" % (metadata.get("namespace", "?"), metadata.get("name", "?"))
    errors = []
    for key in sorted(hard):
        wanted = parse_quantity(hard[key])
        if wanted is None:
            raise ValueError("hard[%r]: %r is not a quantity" % (key, hard[key]))
        in_use = parse_quantity(used.get(key))
        if in_use is None or in_use <= wanted:
            continue
        errors.append(
            "%s: quota %s would limit %s to %s, but %s %s already in use (now hard %s): the API server keeps the admitted Pods "
            "and refuses every new one until usage drops. Fix: delete Pods until at most %s %s in use, set %s to %s or more, "
            "or set %s: true to lower it anyway"
            % (
                option,
                where,
                key,
                _show(wanted),
                _show(in_use),
                "is" if in_use == 1 else "are",
                current.get(key, "unset"),
                _show(wanted),
                "is" if wanted == 1 else "are",
                option,
                _show(in_use),
                allow_option,
            )
        )
    return errors
