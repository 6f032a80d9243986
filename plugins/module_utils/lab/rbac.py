# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The least-privilege RBAC of the lab, built as data (never as YAML text), and its checks.

``rbac_objects(settings)`` returns every object (dicts ready for ``kubernetes.core.k8s``
``definition``); ``rbac_manifest(settings)`` the same objects as plain YAML, each rule
preceded by a comment naming the lab step that needs it. Every name is validated first:
a value that is not a Kubernetes name is refused with the field and the fix, so no
inventory value can add, remove or change an object. No Ansible import.
"""

from __future__ import annotations

import json
import re
import textwrap

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    yaml = None

from ansible_collections.gpushare.k8s.plugins.module_utils.nvidia.device_plugin import plain as _plain
from ansible_collections.gpushare.k8s.plugins.module_utils.errors import InputError
from ansible_collections.gpushare.k8s.plugins.module_utils.lab.inventory import pod_security_labels

__all__ = [
    "DEFAULTS",
    "InputError",
    "check_dns_label",
    "check_dns_subdomain",
    "check_namespace",
    "create_names_policy_name",
    "node_keys_policy_name",
    "object_drift",
    "rbac_manifest",
    "rbac_objects",
    "token_secrets",
    "validate_settings",
]

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LABEL_RE = re.compile(_LABEL)
_SUBDOMAIN_RE = re.compile(_LABEL + r"(\." + _LABEL + r")*")
TOKEN_SOURCES = ("request", "secret")
RESERVED_NAMESPACES = ("default",)
RESERVED_NAMESPACE_PREFIX = "kube-"
LABELS = {"app.kubernetes.io/managed-by": "gpushare.k8s", "app.kubernetes.io/part-of": "gpushare-lab"}
OWNED_KEY_PREFIX = "nvidia.com/"
RBAC_GROUP = "rbac.authorization.k8s.io"
ADMISSION_VERSION = "admissionregistration.k8s.io/v1"

# The settings the role passes (the role's variables without their ``rbac_`` prefix) and their defaults.
DEFAULTS = {
    "service_account": "gpushare-lab",
    "namespace": "gpushare-system",
    "lab_namespace": "gpu-share",
    "team_namespace": "team-a",
    "device_plugin_namespace": "gpu-share",
    "device_plugin_configmap": "device-plugin-configs",
    "team_quota": "gpu-quota",
    # the collection's second quota beside it (role team_quota's team_quota_coverage_name)
    "team_coverage_quota": "gpushare-gpu-coverage",
    "nodes": [],
    "mig_migration_report": True,
    "quota_coverage": True,
    "admission_guard": True,
    "admission_guard_name": "gpushare-time-slicing-guard",
    "admission_guard_probe_namespace": "gpu-share",
    # GPU requests by intent: the policies an administrator installs (the ServiceAccount reads them), and the Pods the
    # placement step creates, checks and deletes in the lab's namespace
    "intent_admission": True,
    "intent_admission_name": "gpushare-gpu-intent",
    "intent_pods": [],
    "token_source": "request",
    "team_access": False,
    "team_service_account": "gpushare-team",
    # the Pod Security levels of the namespaces it creates (the namespaces role's namespaces_pod_security default)
    "pod_security": {"enforce": "baseline", "warn": "restricted", "audit": "restricted"},
}
_NAMESPACE_FIELDS = ("namespace", "lab_namespace", "team_namespace", "device_plugin_namespace", "admission_guard_probe_namespace")
_BOOL_FIELDS = ("mig_migration_report", "quota_coverage", "admission_guard", "intent_admission", "team_access")


def _shown(value, limit=60):
    """``value`` as a short, single-line repr for an error message (an injected manifest is not echoed whole)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "...'"


def check_dns_label(value, field, example):
    """``value`` if it is a DNS-1123 label (what Kubernetes requires of a namespace name), else ``InputError``."""
    if not isinstance(value, str) or len(value) > 63 or not _LABEL_RE.fullmatch(value):
        raise InputError(
            field,
            "%s is not a DNS-1123 label (at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit)"
            % _shown(value),
            "use a name such as %s" % example,
        )
    return value


def check_dns_subdomain(value, field, example):
    """``value`` if it is a DNS-1123 subdomain (what Kubernetes requires of most object names), else ``InputError``."""
    if not isinstance(value, str) or len(value) > 253 or not _SUBDOMAIN_RE.fullmatch(value):
        raise InputError(
            field,
            "%s is not a DNS-1123 subdomain (at most 253 lower-case letters, digits, '-' and '.', each dot-separated part "
            "starting and ending with a letter or digit)" % _shown(value),
            "use a name such as %s" % example,
        )
    return value


def check_namespace(value, field, example="gpu-share"):
    """A namespace the lab may be granted: a DNS-1123 label, neither ``default`` nor ``kube-*``."""
    check_dns_label(value, field, example)
    if value in RESERVED_NAMESPACES or value.startswith(RESERVED_NAMESPACE_PREFIX):
        raise InputError(
            field,
            "namespace %r belongs to the cluster (default and kube-* hold what every user and the control plane rely on); "
            "the lab's ServiceAccount must not be granted anything there" % value,
            "use a namespace of the lab's own, such as %s" % example,
        )
    return value


def node_keys_policy_name(service_account):
    """Name of the administrator's ValidatingAdmissionPolicy that limits the ServiceAccount's node writes."""
    return "%s-node-keys" % service_account


def validate_settings(settings, prefix="rbac_"):
    """The settings with defaults filled in, every name checked; ``InputError`` names the field (``<prefix><key>``)."""
    if not isinstance(settings, dict):
        raise InputError("%ssettings" % prefix, "must be a mapping, got %s" % type(settings).__name__, "pass the role's variables")
    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        raise InputError(prefix + unknown[0], "is not a setting of the RBAC", "use one of %s" % ", ".join(prefix + key for key in DEFAULTS))
    merged = _plain(dict(DEFAULTS, **settings))

    def field(key):
        return prefix + key  # one place that spells the role's variable names

    for key in _BOOL_FIELDS:
        if not isinstance(merged[key], bool):
            raise InputError(field(key), "must be true or false, got %s" % _shown(merged[key]), "set it to true or false")
    check_dns_label(merged["service_account"], field("service_account"), DEFAULTS["service_account"])
    check_dns_label(merged["team_service_account"], field("team_service_account"), DEFAULTS["team_service_account"])
    for key in _NAMESPACE_FIELDS:
        check_namespace(merged[key], field(key), DEFAULTS[key] if key != "namespace" else "gpushare-system")
    check_dns_subdomain(merged["device_plugin_configmap"], field("device_plugin_configmap"), DEFAULTS["device_plugin_configmap"])
    check_dns_subdomain(merged["team_quota"], field("team_quota"), DEFAULTS["team_quota"])
    check_dns_subdomain(merged["team_coverage_quota"], field("team_coverage_quota"), DEFAULTS["team_coverage_quota"])
    check_dns_subdomain(merged["admission_guard_name"], field("admission_guard_name"), DEFAULTS["admission_guard_name"])
    check_dns_subdomain(merged["intent_admission_name"], field("intent_admission_name"), DEFAULTS["intent_admission_name"])
    if not isinstance(merged["intent_pods"], list):
        raise InputError(field("intent_pods"), "must be a list of Pod names, got %s" % _shown(merged["intent_pods"]),
                         "give the names of the placement step's intent Pods, e.g. [intent-shared]")
    for index, name in enumerate(merged["intent_pods"]):
        check_dns_subdomain(name, "%s[%d]" % (field("intent_pods"), index), "intent-shared")
    nodes = merged["nodes"]
    if isinstance(nodes, (str, bytes)) or not isinstance(nodes, (list, tuple)):
        raise InputError(field("nodes"), "must be a list of node names, got %s" % _shown(nodes), "use e.g. [lab-node-0, lab-node-1]")
    for index, node in enumerate(nodes):
        check_dns_subdomain(node, "%s[%d]" % (field("nodes"), index), "lab-node-0")
    merged["nodes"] = sorted(set(nodes))
    try:
        merged["pod_security_labels"] = pod_security_labels(merged["pod_security"])
    except InputError as exc:
        raise InputError(prefix + exc.path, exc.problem, exc.fix) from None
    if merged["token_source"] not in TOKEN_SOURCES:
        raise InputError(
            field("token_source"), "must be one of %s, got %s" % (", ".join(TOKEN_SOURCES), _shown(merged["token_source"])),
            "use request (expiring tokens, the default) or secret (a long-lived token Secret)",
        )
    # The derived names must be valid too: <sa>-token (Secret), <sa>-node-keys (policy).
    check_dns_subdomain(node_keys_policy_name(merged["service_account"]), field("service_account"), DEFAULTS["service_account"])
    if merged["team_access"] and (merged["team_namespace"], merged["team_service_account"]) == (merged["namespace"], merged["service_account"]):
        raise InputError(
            field("team_service_account"),
            "the team's ServiceAccount %s/%s is the lab's own" % (merged["team_namespace"], merged["team_service_account"]),
            "give the team ServiceAccount another name (default %s)" % DEFAULTS["team_service_account"],
        )
    return merged


# ----------------------------------------------------------------------------- objects


def _meta(name, namespace=None):
    metadata = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    metadata["labels"] = dict(LABELS)
    return metadata


def _rule(groups, resources, verbs, names=None):
    rule = {"apiGroups": list(groups), "resources": list(resources)}
    if names:
        rule["resourceNames"] = list(names)
    rule["verbs"] = list(verbs)
    return rule


def _unique(values):
    seen = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


def _cel_string(value):
    """A CEL string literal (JSON's quoting is valid CEL for these names)."""
    return json.dumps(value)


class _Entry:  # pylint: disable=too-few-public-methods
    """One object plus the comments the manifest shows: one before the object, one per rule."""

    def __init__(self, obj, comment="", reasons=None):
        self.obj = obj
        self.comment = comment
        self.reasons = reasons or []


def _role(kind, name, namespace, rules_with_reasons):
    obj = {"apiVersion": RBAC_GROUP + "/v1", "kind": kind, "metadata": _meta(name, namespace)}
    obj["rules"] = [rule for _reason, rule in rules_with_reasons]
    return _Entry(obj, reasons=[reason for reason, _rule_ in rules_with_reasons])


def _binding(kind, name, namespace, role_kind, subject_name, subject_namespace):
    obj = {
        "apiVersion": RBAC_GROUP + "/v1",
        "kind": kind,
        "metadata": _meta(name, namespace),
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": subject_name, "namespace": subject_namespace}],
    }
    return _Entry(obj)


def _token_secret(service_account, namespace):
    obj = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/service-account-token",
        "metadata": dict(_meta(service_account + "-token", namespace), annotations={"kubernetes.io/service-account.name": service_account}),
    }
    return _Entry(obj, "A long-lived token (token_source=secret), filled in by the token controller; delete this Secret to revoke it.")


def token_secrets(settings):
    """The long-lived token Secrets of ``token_source=secret`` (deleted when the role removes the RBAC, or switches to request)."""
    merged = validate_settings(settings)
    secrets = [_token_secret(merged["service_account"], merged["namespace"]).obj]
    if merged["team_access"]:
        secrets.append(_token_secret(merged["team_service_account"], merged["team_namespace"]).obj)
    return secrets


def _cluster_rules(s):
    nodes = s["nodes"]
    lab_namespaces = _unique([s["lab_namespace"], s["team_namespace"]])
    policy = node_keys_policy_name(s["service_account"])
    rules = [
        ("Steps 2 and 3 (node_sharing, mig_node, gpu_feature_labels): label the nodes (kubernetes.core.k8s reads, then patches); "
         "node_resources reads each node first. ValidatingAdmissionPolicy %s refuses any change but %s* labels." % (policy, OWNED_KEY_PREFIX),
         _rule([""], ["nodes"], ["get", "patch"], nodes)),
        ("Steps 2 and 3 (node_resources): advertise GPU resources; policy %s refuses any change but %s* keys of "
         "capacity and allocatable." % (policy, OWNED_KEY_PREFIX),
         _rule([""], ["nodes/status"], ["patch"], nodes)),
        ("The preflight, step 3 (gpu_feature_labels, mig_migration_report), step 5 (quota_coverage) and the lab report list "
         "the nodes; a list cannot be limited to names, and nodes belong to no namespace.",
         _rule([""], ["nodes"], ["list"])),
        ("Step 1 (namespaces): check that the lab's namespaces exist. This RBAC creates them; no patch, so the ServiceAccount "
         "cannot relabel them (Pod Security labels included).",
         _rule([""], ["namespaces"], ["get"], lab_namespaces)),
        ("Step 2 (admission_guard): read the guard the administrator installs (playbooks/rbac.yml) and wait until it is "
         "type-checked. Writing admission policies is not granted: whoever may write them can refuse any request.",
         _rule(["admissionregistration.k8s.io"], ["validatingadmissionpolicies", "validatingadmissionpolicybindings"], ["get"],
               [s["admission_guard_name"]])),
    ]
    if s["intent_admission"]:
        rules.append((
            "After step 3 (intent_admission): read the GPU intent policies the administrator installs (playbooks/rbac.yml); "
            "as for the guard, writing them is not granted.",
            _rule(["admissionregistration.k8s.io"], ["mutatingadmissionpolicies", "mutatingadmissionpolicybindings",
                                                     "validatingadmissionpolicies", "validatingadmissionpolicybindings"], ["get"],
                  [s["intent_admission_name"]])))
    return rules


def _namespace_rules(s, namespace):
    rules = []
    lab_namespaces = _unique([s["lab_namespace"], s["team_namespace"]])
    if namespace == s["device_plugin_namespace"]:
        rules.append(("Steps 1 and 7 (device_plugin_config): create the ConfigMap (a create cannot be limited to a name by RBAC: the "
                      "administrator's create-names policy refuses any other name) ...",
                      _rule([""], ["configmaps"], ["create"])))
        rules.append(("... read it (step 2 checks the node labels against it too) and patch it (merging keys others added).",
                      _rule([""], ["configmaps"], ["get", "patch"], [s["device_plugin_configmap"]])))
    if namespace in lab_namespaces:
        rules.append(("Steps 4, 5 and 8 (scheduling_check, team_quota, placement): create the lab's Pods (the quota must refuse "
                      "one of them), patch them on a re-run, wait until they are bound (get).",
                      _rule([""], ["pods"], ["get", "create", "patch"])))
        if s["mig_migration_report"]:
            rules.append(("Step 3 (mig_migration_report): list every workload kind of this namespace (read-only); also the lab "
                          "report's list of the lab's Pods.",
                          _rule([""], ["pods", "podtemplates", "replicationcontrollers"], ["list"])))
            rules.append(("Step 3 (mig_migration_report): the apps workloads of this namespace.",
                          _rule(["apps"], ["daemonsets", "deployments", "replicasets", "statefulsets"], ["list"])))
            rules.append(("Step 3 (mig_migration_report): the batch workloads of this namespace.",
                          _rule(["batch"], ["cronjobs", "jobs"], ["list"])))
        else:
            rules.append(("The lab report lists the lab's Pods.", _rule([""], ["pods"], ["list"])))
    if namespace == s["lab_namespace"] and s["intent_admission"] and s["intent_pods"]:
        rules.append(("Step 8 (placement): delete the Pods that asked for a GPU by intent, once checked (by name).",
                      _rule([""], ["pods"], ["delete"], _unique(s["intent_pods"]))))
    if namespace == s["team_namespace"]:
        rules.append(("Step 5 (team_quota): create the quota and the coverage quota beside it ...", _rule([""], ["resourcequotas"], ["create"])))
        rules.append(("... read them until the quota controller has counted, patch them on a re-run.",
                      _rule([""], ["resourcequotas"], ["get", "patch"], _unique([s["team_quota"], s["team_coverage_quota"]]))))
        if s["quota_coverage"]:
            rules.append(("Step 5 (quota_coverage): list this namespace's ResourceQuotas, to find GPU names its quota does not "
                          "cover (read-only).",
                          _rule([""], ["resourcequotas"], ["list"])))
    if s["admission_guard"] and namespace == s["admission_guard_probe_namespace"] and namespace not in lab_namespaces:
        rules.append(("Step 2 (admission_guard): the guard proves itself with a server-side dry-run create of a Pod here "
                      "(nothing is created).",
                      _rule([""], ["pods"], ["get", "create"])))
    return rules


def _node_keys_policy(s):
    """The administrator's policy: the ServiceAccount's node writes may change only nvidia.com/* labels and resources."""
    name = node_keys_policy_name(s["service_account"])
    user = "system:serviceaccount:%s:%s" % (s["namespace"], s["service_account"])
    prefix = _cel_string(OWNED_KEY_PREFIX)

    def key_variables(name, path):
        # old<Name>, new<Name>: the map before and after; <name>: the keys added, changed or removed outside nvidia.com/.
        title = name[0].upper() + name[1:]
        return [
            {"name": "old" + title, "expression": "oldObject.%s.orValue({})" % path},
            {"name": "new" + title, "expression": "object.%s.orValue({})" % path},
            {"name": name, "expression": (
                "(variables.new{t}.filter(k, !(k in variables.old{t}) || variables.old{t}[k] != variables.new{t}[k])"
                " + variables.old{t}.filter(k, !(k in variables.new{t}))).filter(k, !k.startsWith({prefix}))"
            ).format(t=title, prefix=prefix)},
        ]

    def foreign(variable, what):
        return {
            "expression": "size(variables.%s) == 0" % variable,
            "reason": "Forbidden",
            "messageExpression": ("%s + ' may change only %s* %s of a node; this request changes ' + variables.%s.join(', ')"
                                  % (_cel_string(user), OWNED_KEY_PREFIX, what, variable)),
        }

    def unchanged(paths, what):
        expression = " && ".join("object.%s == oldObject.%s" % (path, path) for path in paths)
        return {
            "expression": expression,
            "reason": "Forbidden",
            "message": "%s may not change a node's %s; it may change only %s* labels and %s* resources of status.capacity and "
                       "status.allocatable" % (user, what, OWNED_KEY_PREFIX, OWNED_KEY_PREFIX),
        }

    status_fields = ("conditions", "addresses", "daemonEndpoints", "nodeInfo", "phase", "volumesAttached", "volumesInUse", "config")
    spec = {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes", "nodes/status"]},
        ]},
        "matchConditions": [{"name": "lab-service-account", "expression": "request.userInfo.username == %s" % _cel_string(user)}],
        "variables": (key_variables("labels", "metadata.?labels") + key_variables("capacity", "status.?capacity")
                      + key_variables("allocatable", "status.?allocatable")),
        "validations": [
            foreign("labels", "labels"),
            foreign("capacity", "status.capacity resources"),
            foreign("allocatable", "status.allocatable resources"),
            unchanged(["metadata.?annotations", "metadata.?finalizers", "metadata.?ownerReferences"],
                      "annotations, finalizers or owner references"),
            unchanged(["?spec"], "spec (taints, unschedulable, podCIDR, providerID, ...)"),
            unchanged(["status.?%s" % field for field in status_fields], "status other than capacity and allocatable"),
        ],
    }
    comment = ("Owned by the administrator: the ServiceAccount may patch nodes and nodes/status, and this policy refuses every "
               "change of its but to %s* labels, capacity and allocatable." % OWNED_KEY_PREFIX)
    return _denying_policy(name, spec, comment)


def _denying_policy(name, spec, comment):
    """The entries of an administrator's ValidatingAdmissionPolicy ``name`` and its binding, which denies what it refuses."""
    policy = {"apiVersion": ADMISSION_VERSION, "kind": "ValidatingAdmissionPolicy", "metadata": _meta(name), "spec": spec}
    binding = {
        "apiVersion": ADMISSION_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": _meta(name),
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }
    return [_Entry(policy, comment), _Entry(binding)]


def create_names_policy_name(service_account):
    """Name of the administrator's ValidatingAdmissionPolicy that limits the names of what the ServiceAccount creates."""
    return "%s-create-names" % service_account


def _create_names_policy(s):
    """The administrator's policy: RBAC cannot limit a create to names (``resourceNames`` does not apply to create), so
    the ServiceAccount's creates of ConfigMaps in the device-plugin namespace are refused but for the ConfigMap it owns.

    Without it the ServiceAccount could create any ConfigMap there: in operator mode the GPU Operator's namespace,
    where a ConfigMap of another name (the configure-only role's record, say) would be read by another role."""
    name = create_names_policy_name(s["service_account"])
    user = "system:serviceaccount:%s:%s" % (s["namespace"], s["service_account"])
    namespace, names = s["device_plugin_namespace"], [s["device_plugin_configmap"]]
    names_cel = "[%s]" % ", ".join(_cel_string(item) for item in names)
    spec = {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]},
        ]},
        "matchConditions": [{"name": "lab-service-account", "expression": "request.userInfo.username == %s" % _cel_string(user)}],
        "validations": [{
            "expression": "request.namespace != %s || object.metadata.?name.orValue('') in %s" % (_cel_string(namespace), names_cel),
            "reason": "Forbidden",
            "messageExpression": ("%s + ' may create only ConfigMap %s in namespace %s; this request creates ' + "
                                  "object.metadata.?name.orValue('(a generated name)')" % (_cel_string(user), ", ".join(names), namespace)),
        }],
    }
    comment = ("Owned by the administrator: a create cannot be limited to names by RBAC, so this policy refuses the "
               "ServiceAccount's creates of ConfigMaps in %s but for %s." % (namespace, ", ".join(names)))
    return _denying_policy(name, spec, comment)


def _entries(settings):
    s = validate_settings(settings)
    sa, sa_namespace = s["service_account"], s["namespace"]
    entries = []
    namespaces = _unique([sa_namespace, s["device_plugin_namespace"], s["lab_namespace"], s["team_namespace"]])
    for namespace in namespaces:
        metadata = _meta(namespace)
        metadata["labels"].update(s["pod_security_labels"])
        entries.append(_Entry({"apiVersion": "v1", "kind": "Namespace", "metadata": metadata},
                              "The lab's namespaces are created here, because the Roles live in them." if namespace == namespaces[0] else ""))
    entries.append(_Entry({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(sa, sa_namespace)}))
    if s["token_source"] == "secret":
        entries.append(_token_secret(sa, sa_namespace))
    entries.append(_role("ClusterRole", sa, None, _cluster_rules(s)))
    entries.append(_binding("ClusterRoleBinding", sa, None, "ClusterRole", sa, sa_namespace))
    role_namespaces = _unique([s["device_plugin_namespace"], s["lab_namespace"], s["team_namespace"]]
                              + ([s["admission_guard_probe_namespace"]] if s["admission_guard"] else []))
    for namespace in role_namespaces:
        entries.append(_role("Role", sa, namespace, _namespace_rules(s, namespace)))
        entries.append(_binding("RoleBinding", sa, namespace, "Role", sa, sa_namespace))
    entries.extend(_node_keys_policy(s))
    entries.extend(_create_names_policy(s))
    if s["team_access"]:
        team, team_namespace = s["team_service_account"], s["team_namespace"]
        entries.append(_Entry({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(team, team_namespace)},
                              "Opt-in (team_access): a member of the team may run and remove Pods in %s and read its quota; "
                              "nothing in any other namespace, no quota changes, nothing cluster-wide." % team_namespace))
        if s["token_source"] == "secret":
            entries.append(_token_secret(team, team_namespace))
        entries.append(_role("Role", team, team_namespace, [
            ("Run, watch and remove the team's Pods.", _rule([""], ["pods"], ["get", "list", "watch", "create", "delete"])),
            ("Read their logs.", _rule([""], ["pods/log"], ["get"])),
            ("Read the team's quota.", _rule([""], ["resourcequotas"], ["get", "list", "watch"])),
        ]))
        entries.append(_binding("RoleBinding", team, team_namespace, "Role", team, team_namespace))
    return s, entries


def rbac_objects(settings):
    """Every object of the RBAC, as dicts, in the order they are applied (namespaces first)."""
    return [entry.obj for entry in _entries(settings)[1]]


def _comment(text, indent=""):
    """``text`` as YAML comment lines (wrapped; a line break in ``text`` can never end the comment)."""
    lines = []
    for paragraph in text.replace("\r", "\n").split("\n"):
        lines.extend(textwrap.wrap(paragraph, width=110 - len(indent), break_on_hyphens=False, break_long_words=False))
    return "".join("%s# %s\n" % (indent, line) for line in lines)


if yaml is not None:
    class _Dumper(yaml.SafeDumper):  # pylint: disable=too-many-ancestors
        """Block style, except lists of plain values (``verbs: [get, patch]``), as Kubernetes documentation writes them."""

    def _represent_list(dumper, data):
        flow = all(isinstance(item, (str, int, float, bool)) for item in data)
        return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)

    _Dumper.add_representer(list, _represent_list)


def _dump(data):
    return yaml.dump(data, Dumper=_Dumper, default_flow_style=False, sort_keys=False, width=120)


def rbac_manifest(settings):
    """The objects of ``rbac_objects`` as plain YAML (for review or ``kubectl apply -f``), every rule commented."""
    s, entries = _entries(settings)
    header = ("Least-privilege RBAC for running the gpushare.k8s GPU-sharing lab as ServiceAccount %s/%s, rendered by the "
              "gpushare.k8s.rbac role. Apply it as a cluster administrator (kubectl apply -f), then run the lab with the "
              "ServiceAccount's kubeconfig. Each rule names the lab step that needs it." % (s["namespace"], s["service_account"]))
    documents = []
    for entry in entries:
        obj = dict(entry.obj)
        rules = obj.pop("rules", None)
        text = _comment(entry.comment) + _dump(obj)
        if rules is not None:
            text += "rules:\n"
            for reason, rule in zip(entry.reasons, rules):
                text += _comment(reason, "  ") + "".join("  " + line + "\n" for line in _dump([rule]).splitlines())
        documents.append(text)
    return _comment(header) + "---\n" + "---\n".join(documents)


# ----------------------------------------------------------------------------- comparing with the cluster


def object_drift(desired, live, path=""):
    """Where ``live`` differs from ``desired``: a list of paths (empty when every field of ``desired`` is in ``live``).

    Fields the API server adds (defaults, status, metadata it manages) are not differences; a list must have
    the same length and each element must match. A missing ``live`` object (``None``) is the difference ``<path>``.
    """
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return [path or "."]
        found = []
        for key, value in desired.items():
            if value is None and live.get(key) is None:
                continue
            if key not in live:
                found.append("%s.%s" % (path, key) if path else key)
                continue
            found.extend(object_drift(value, live[key], "%s.%s" % (path, key) if path else key))
        return found
    if isinstance(desired, list):
        if not isinstance(live, list) or len(live) != len(desired):
            return [path or "."]
        found = []
        for index, (want, have) in enumerate(zip(desired, live)):
            found.extend(object_drift(want, have, "%s[%d]" % (path, index)))
        return found
    return [] if desired == live else [path or "."]
