# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Filters that check the lab's names and addresses and build its objects as data (documentation: one sidecar
``<filter>.yml`` per filter). A value that is not a Kubernetes name is refused with the field and the fix before
anything is written; a manifest is a dict dumped to YAML, never text with values pasted in."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpushare.k8s.plugins.module_utils.lab import inventory as _inv
from ansible_collections.gpushare.k8s.plugins.module_utils.lab import kwok_cluster as _kwok


def _errors_as_filter_errors(func):
    """Report the model's errors (ValueError and its InputError) as AnsibleFilterError with the same message."""

    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except ValueError as exc:
            raise AnsibleFilterError(str(exc)) from None

    wrapper.__name__ = func.__name__
    wrapper.__doc__ = func.__doc__
    return wrapper


@_errors_as_filter_errors
def checked_names(value, kind, field, example=None):
    """``value`` (a name or a list of names) unchanged, once each is a Kubernetes name of ``kind``."""
    return _inv.check_names(value, kind, field, example)


@_errors_as_filter_errors
def lab_name_errors(settings):
    """One message per name of the lab's inventory fields that Kubernetes would refuse; empty when all are names."""
    return _inv.lab_name_errors(settings)


@_errors_as_filter_errors
def namespace_changes(current, labels=None, pod_security=None):
    """The namespaces to create or relabel: ``[{name, exists, labels, pod_security_only}]``."""
    return _inv.namespace_changes(current, labels, pod_security)


@_errors_as_filter_errors
def configmap_manifest(data, name, namespace, name_field="name", namespace_field="namespace"):
    """A ConfigMap holding ``data`` (key -> text, each a ``|-`` block), as the YAML file the lab writes."""
    return _inv.manifest_text(_inv.configmap_object(data, name, namespace, fields=(name_field, namespace_field)))


@_errors_as_filter_errors
def quota_manifest(resources, units, name, namespace, name_field="name", namespace_field="namespace", units_field="units"):
    """A ResourceQuota limiting ``requests.<resource>`` to ``units`` for each resource, as the YAML file the lab writes."""
    return _inv.manifest_text(_inv.quota_object(resources, units, name, namespace, fields=(name_field, namespace_field, units_field)))


@_errors_as_filter_errors
def loopback_address(address, field="bind_address"):
    """``address`` unchanged when it is a loopback address (127.0.0.0/8, ::1, localhost)."""
    return _kwok.check_loopback(address, field)


class FilterModule:
    """gpushare.k8s filters over the lab's names and objects."""

    def filters(self):
        return {
            "checked_names": checked_names,
            "configmap_manifest": configmap_manifest,
            "lab_name_errors": lab_name_errors,
            "loopback_address": loopback_address,
            "namespace_changes": namespace_changes,
            "quota_manifest": quota_manifest,
        }
