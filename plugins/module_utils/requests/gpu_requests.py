# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The workload walker: which containers ask for how many units of a GPU resource.

The one implementation behind the ``gpu_request_check`` module, the ``gpu_offenders`` filter, the
MIG migration report and the lab's ``bin/check-request.sh`` (whose command line is
:mod:`check_request`). YAML text is read with :func:`manifest_yaml.kubectl_documents`: what kubectl
would send, or a refusal. Only the fields that can hold a Pod spec are visited.

Which objects are walked (as kubectl reads a file: what it sends is what is checked):

- Any object holding an ``items`` field is a list to kubectl, whatever its kind (``List``, ``PodList``, but
  also a ``Pod`` or a ``ConfigMap``): it sends the items, never the object, so the items are walked. An item
  with neither ``kind`` nor ``apiVersion`` becomes the list's kind without its ``List`` suffix, in the list's
  ``apiVersion`` (kind-less items of a ``kind: Deployment`` are Deployments). At the top of a document any
  ``items`` counts (``items: null`` sends nothing); inside a list only a list of items does, and kubectl
  refuses a list nested in a list, so the check does too. Objects given as data (from Ansible) are
  walked both as the object and as its items: either may be what reaches the API server.
- Kubernetes' own workload kinds, in their own API group (``v1`` Pod, PodTemplate and
  ReplicationController; ``apps`` Deployment, StatefulSet, DaemonSet, ReplicaSet; ``batch`` Job and
  CronJob), at their Pod spec.
- Any object of another API group, or a workload kind's name in a group that is not its own (a Volcano
  ``batch.volcano.sh`` Job, a ``Job`` without ``apiVersion``), is searched, with two rules that do not depend
  on where the kind nests its templates, so kinds this file never heard of are checked, not passed. Every
  mapping anywhere in it outside ``metadata`` and ``status`` that holds ``containers``, ``initContainers`` or
  ``ephemeralContainers`` is taken as a Pod spec (JobSet, LeaderWorkerSet, Volcano, Kubeflow training jobs, Ray,
  KServe predictors and ServingRuntimes, Argo ``containerSet``), and when it is the ``spec`` of a template (a
  mapping with ``metadata`` beside it) that template's intent is read as a Pod's. Every other mapping holding a
  container's resource requirements (:data:`REQUIREMENT_FIELDS`: ``resources``, Tekton's ``computeResources``,
  Kubeflow Trainer's ``resourcesPerNode``) whose ``limits`` or ``requests`` name a checked resource is taken as
  one container, named by its ``name`` field or else by the path of those requirements (Argo's ``container``,
  ``script`` and ``sidecars``, Tekton steps, ``stepTemplate``, sidecars and a TaskRun's own ``computeResources``,
  KServe's ``model`` and framework predictors). A ``resources`` that is not such a mapping (a list of quotas, a
  map of Ray's logical resources) is not a container's and is left alone.
- Other kinds of Kubernetes' own API groups (``v1``, ``apps``, ``batch``, ``*.k8s.io`` except
  ``*.x-k8s.io``; ConfigMap, Service, ...) carry no Pod and are skipped.

Claims (Dynamic Resource Allocation), when ``claim_limits`` names shared device classes: every request of a
ResourceClaim or ResourceClaimTemplate (``exactly`` or each ``firstAvailable`` alternative) for such a class
is counted in shares, ``count`` devices times the shares its ``capacity.requests`` take (a request of twice
the class's limit is two shares); ``allocationMode: All`` asks for every share there is. A request for
more shares than allowed is reported like a container asking for 2 slices of a time-sliced GPU.

GPU requests by intent, when ``intents`` holds what each intent becomes on a cluster (the flat map of
``intents.params_data``, which the intent policies carry): a Pod or Pod template annotated ``gpushare.k8s/gpu`` that
names no GPU itself is read as admission will rewrite it. Each is reported (what it becomes, or why admission will
refuse it: an intent no pool gives, a bad count, more than the intent gives one container), and the containers it
names are checked as if they asked for that resource themselves (``field`` ``intent``). This is a reading of the
policies' rule for use before deploying; the tests hold it to what the API server's dry run of the policies does.

Counts are read as the API server reads quantities (:func:`quantity.whole_units`): ``2``, ``"2"``,
``2000m``, ``2e0`` are 2, ``1k`` is 1000; a quantity that is not a whole number (``1500m``), negative,
too large or not a quantity at all is an error, never a count.
"""

from __future__ import annotations

import json

try:
    from ..k8s import manifest_yaml as _yaml
    from ..k8s.manifest_yaml import ManifestError
    from ..k8s.quantity import MAX_COUNT, whole_units
except ImportError:  # loaded as a plain module, next to manifest_yaml.py and quantity.py (bin/check-request.sh)
    import manifest_yaml as _yaml  # type: ignore[no-redef]
    from manifest_yaml import ManifestError  # type: ignore[no-redef]
    from quantity import MAX_COUNT, whole_units  # type: ignore[no-redef]


__all__ = [
    "DEFAULT_RESOURCES",
    "MAX_COUNT",
    "ManifestError",
    "POD_SPEC_PATHS",
    "REQUIREMENT_FIELDS",
    "WORKLOAD_KINDS",
    "CLAIM_SPEC_PATHS",
    "check_claim_limits",
    "check_intents",
    "check_manifest",
    "check_options",
    "container_requests",
    "find_offenders",
    "read_manifest",
    "whole_units",
]

# gpu_names.GPU_RESOURCE, spelled out: this file also runs alone inside the installed bin/check-request.sh, where
# nothing else of the collection exists (tests/unit/plugins/module_utils/test_gpu_requests.py holds the two equal).
DEFAULT_RESOURCES = ("nvidia.com/gpu",)

# Where the Pod spec lives in each of Kubernetes' own workload kinds (read there only in the kind's own API group).
POD_SPEC_PATHS = {
    "Pod": ("spec",),
    "PodTemplate": ("template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
WORKLOAD_KINDS = tuple(sorted(POD_SPEC_PATHS))
WORKLOAD_GROUPS = {
    "Pod": "", "PodTemplate": "", "ReplicationController": "",
    "Deployment": "apps", "StatefulSet": "apps", "DaemonSet": "apps", "ReplicaSet": "apps",
    "Job": "batch", "CronJob": "batch",
}
# Where the claim spec lives in DRA's claim kinds (resource.k8s.io).
CLAIM_SPEC_PATHS = {
    "ResourceClaim": ("spec",),
    "ResourceClaimTemplate": ("spec", "spec"),
}
CLAIM_GROUP = "resource.k8s.io"
ALL_DEVICES = "all"
CONTAINER_FIELDS = ("containers", "initContainers", "ephemeralContainers")
# Fields that hold one container's resource requirements (limits and requests) in the kinds teams use: Kubernetes and
# everything embedding its Container (Argo, KServe, Tekton v1beta1), Tekton v1 (steps, stepTemplate, sidecars, TaskRun
# and PipelineRun overrides) and Kubeflow Trainer (TrainJob's trainer). Read only in the kinds that are searched.
REQUIREMENT_FIELDS = ("resources", "computeResources", "resourcesPerNode")
_BUILTIN_GROUPS = frozenset(("", "apps", "batch", "autoscaling", "policy", "extensions"))
_SKIPPED_FIELDS = frozenset(("apiVersion", "kind", "metadata", "status"))
# The intent vocabulary's annotations, their one home (module_utils/requests/intents.py builds the policies that read them; this
# module stands alone in bin/check-request.sh, so the others import them from here).
INTENT_ANNOTATION = "gpushare.k8s/gpu"
COUNT_ANNOTATION = "gpushare.k8s/gpu-count"
CONTAINERS_ANNOTATION = "gpushare.k8s/gpu-containers"
_GPU_PREFIX = "nvidia.com/"
_MAX_INTENT_COUNT = 999

MAX_LIST_DEPTH = 10
MAX_STEPS = 500000
# ---------------------------------------------------------------------------
# two views of a document: objects as data, or nodes read as kubectl reads them


class _ObjectView:
    """Objects as data (dicts and lists, from Ansible or JSON): sent to the API server as JSON."""

    @staticmethod
    def is_null(value):
        return value is None

    @staticmethod
    def as_map(value):
        return value if isinstance(value, dict) else None

    @staticmethod
    def as_list(value):
        return value if isinstance(value, (list, tuple)) else None

    @staticmethod
    def as_text(value):
        return value if isinstance(value, str) else None

    @staticmethod
    def quantity(value):
        """``(count, None)`` or ``(None, shown, why not)`` for a quantity as its JSON is sent."""
        if value is None:
            return 0, None, None  # JSON null: the API server reads a zero quantity
        if isinstance(value, str):
            count, why = whole_units(value)
            return count, repr(value if len(value) <= 40 else value[:30] + "..."), why
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None, json.dumps(value) if isinstance(value, bool) else type(value).__name__, "not a quantity (the API server refuses it)"
        try:
            token = _yaml.json_token(value)
        except Exception:  # pylint: disable=broad-exception-caught
            return None, repr(value), "not a number JSON can carry"
        count, why = whole_units(token)
        return count, token, why

    @staticmethod
    def line(_value):
        return None

    kubectl = False  # objects from Ansible: kubernetes.core may send the object or its items


class _NodeView:
    """Nodes of :func:`manifest_yaml.kubectl_documents`, read as kubectl reads them."""

    @staticmethod
    def is_null(node):
        return _yaml.is_null(node)

    @staticmethod
    def as_map(node):
        return _yaml.mapping(node)

    @staticmethod
    def as_list(node):
        return _yaml.sequence(node)

    @staticmethod
    def as_text(node):
        node = _yaml.target(node)
        if not isinstance(node, _yaml.ScalarNode):
            return None
        value = _yaml.scalar(node)
        return value if isinstance(value, str) else None

    @staticmethod
    def quantity(node):
        node = _yaml.target(node)
        if _yaml.is_null(node):
            return 0, None, None
        if not isinstance(node, _yaml.ScalarNode):
            return None, "a %s" % ("list" if isinstance(node, _yaml.SequenceNode) else "mapping"), "not a quantity (the API server refuses it)"
        value = _yaml.scalar(node)
        shown = repr(node.value if len(node.value) <= 40 else node.value[:30] + "...")
        if isinstance(value, str):
            count, why = whole_units(value)
            return count, shown, why
        if isinstance(value, bool):
            return None, shown, "a boolean to kubectl, not a quantity (the API server refuses it)"
        count, why = whole_units(_yaml.json_token(value))
        return count, shown, why

    @staticmethod
    def line(node):
        return node.start_mark.line + 1 if node is not None else None

    kubectl = True  # kubectl's reading: an object holding items is sent as its items only; an object without kind is refused


# ---------------------------------------------------------------------------
# the walk


def _group(api_version):
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def _builtin(api_version):
    """True for Kubernetes' own API groups (v1, apps, batch, *.k8s.io but not *.x-k8s.io)."""
    if api_version is None:
        return False
    group = _group(api_version)
    return group in _BUILTIN_GROUPS or (group.endswith(".k8s.io") and not group.endswith(".x-k8s.io"))


class _Walker:
    def __init__(self, view, resources, budget=MAX_STEPS, claim_limits=None, intents=None):
        self.view = view
        self.resources = resources
        self.claim_limits = claim_limits or {}
        self.intents = intents
        self.found = []
        self.asked = []
        self.steps = 0
        self.budget = budget
        self.document = 0

    def step(self):
        self.steps += 1
        if self.steps > self.budget:
            raise ManifestError(
                "more than %d containers, items or keys to visit (YAML aliases multiplying content?); split the manifest" % self.budget,
                self.document + 1,
            )

    def fail(self, problem, node):
        raise ManifestError(problem, self.document + 1, self.view.line(node))

    def mapping(self, node, where):
        result = self.view.as_map(node)
        if result is None:
            self.fail("%s must be a mapping" % where, node)
        return result

    def check_document(self, index, doc):
        self.document = index
        if self.view.is_null(doc):
            return
        self.check_object(doc, "", (None, None), 0, set(), top=True)

    def check_object(self, node, where, inherited, depth, seen, top=False):
        """One object; ``inherited`` is the ``(kind, apiVersion)`` a kind-less list item gets from its list."""
        view = self.view
        obj = view.as_map(node)
        if obj is None:
            self.fail("%s is not a Kubernetes object (expected a mapping with kind, metadata, spec)" % (where.rstrip(".") or "the document"), node)
        kind = view.as_text(obj.get("kind"))
        api_version = view.as_text(obj.get("apiVersion"))
        if not kind and not api_version and inherited[0] is not None:
            kind, api_version = inherited
        if view.kubectl and (not kind or (not top and not api_version)):
            missing = "kind" if not kind else "apiVersion"
            self.fail(
                "%s has no %s, and kubectl refuses it (\"Object '%s' is missing\"). Fix: give the object its %s%s"
                % (where.rstrip(".") or "the document", missing, {"kind": "Kind"}.get(missing, missing), missing,
                   " (an item without kind and apiVersion takes the list's kind without 'List')" if not top else ""),
                node,
            )
        listed = False
        if "items" in obj and (top or view.as_list(obj["items"]) is not None):
            self.check_list(obj, where, kind or "", api_version, depth, seen, top)
            if view.kubectl or view.as_list(obj["items"]) is None or (kind or "").endswith("List"):
                return
            listed = True  # kubernetes.core sends the object itself: walk it too, its items aside
        if not kind:
            return
        metadata = view.as_map(obj.get("metadata")) or {}
        name = view.as_text(metadata.get("name")) or view.as_text(metadata.get("generateName")) or ""
        group = _group(api_version or "")  # kubectl maps an object without apiVersion in the core group
        if kind in CLAIM_SPEC_PATHS and group == CLAIM_GROUP and self.claim_limits:
            self.check_claim(node, obj, where, kind, name)
            return
        path = POD_SPEC_PATHS.get(kind)
        if path is None or WORKLOAD_GROUPS[kind] != group:
            if not _builtin(api_version) or path is not None:
                self.search(node, obj, where, kind, name, skip=("items",) if listed else ())
            return
        current, template = obj, obj
        for position, key in enumerate(path):
            child = current.get(key)
            if view.is_null(child):
                return
            template = current  # the mapping holding the Pod spec: the Pod itself, or its template (metadata beside spec)
            current = self.mapping(child, where + ".".join(path[: position + 1]))
        self.check_pod_spec(node, current, where + ".".join(path), kind, name)
        if self.intents is not None:
            self.check_intent(node, template, current, where + ".".join(path), kind, name)

    def search(self, node, obj, where, kind, name, skip=()):
        """A searched object (see the module's docstring): every mapping outside metadata and status holding containers is a
        Pod spec (a template's ``spec``: its intent is read too), every other one holding a container's resource
        requirements naming a checked resource is a container. Iterative: nesting costs no stack."""
        view = self.view
        stack = [(obj[key], where + key, obj, key) for key in reversed(list(obj)) if key not in _SKIPPED_FIELDS and key not in skip]
        while stack:
            value, path, parent, key = stack.pop()
            self.step()
            items = view.as_list(value)
            if items is not None:
                stack.extend((items[position], "%s[%d]" % (path, position), None, None) for position in reversed(range(len(items))))
                continue
            current = view.as_map(value)
            if current is None:
                continue
            if any(field in current for field in CONTAINER_FIELDS):
                self.check_pod_spec(node, current, path, kind, name)
                if self.intents is not None and key == "spec" and parent is not obj:
                    self.check_intent(node, parent, current, path, kind, name)  # a Pod template: metadata beside spec
            else:
                self.check_requirements(node, current, path, kind, name)
            stack.extend((current[child], "%s.%s" % (path, child), current, child) for child in reversed(list(current)) if child not in CONTAINER_FIELDS)

    def check_requirements(self, obj_node, holder, where, kind, name):
        """A mapping outside any Pod spec holding a container's resource requirements that name a checked resource: one container."""
        view = self.view
        for field in REQUIREMENT_FIELDS:
            requirements = view.as_map(holder.get(field))
            if requirements is None:
                continue
            counts = self.counts(requirements, "%s.%s" % (where, field), holder.get(field), strict=False)
            label = view.as_text(holder.get("name")) or "%s.%s" % (where, field)
            for resource in self.resources:
                if resource in counts:
                    self.found.append({"document": self.document, "kind": kind, "name": name, "container": label, "resource": resource,
                                       "count": counts[resource], "field": field, "path": "%s.%s" % (where, field),
                                       "object": obj_node if self.view is _ObjectView else None, "pod_spec": None})

    def counts(self, requirements, where, node, strict=True):
        """``{resource: units}`` of the checked resources a container's requirements name (the larger of limit and request).

        ``strict``: a ``limits`` or ``requests`` that is not a mapping is an error (in a Pod spec); otherwise it is not a
        container's and is skipped. A checked resource whose value is not a whole quantity is an error either way.
        """
        view = self.view
        counts = {}
        for section in ("limits", "requests"):
            section_node = requirements.get(section)
            if view.is_null(section_node):
                continue
            amounts = self.mapping(section_node, "%s.%s" % (where, section)) if strict else view.as_map(section_node)
            if amounts is None:
                continue
            for resource in self.resources:
                if resource not in amounts:
                    continue
                value = amounts[resource]
                count, shown, why = view.quantity(value)
                if count is None:
                    self.fail("%s.%s[%s] is %s, %s" % (where, section, resource, shown, why), value if value is not None else node)
                counts[resource] = max(count, counts.get(resource, 0))
        return counts

    def check_claim(self, obj_node, obj, where, kind, name):
        """Each request of a claim (or claim template) for a class of ``claim_limits``, counted in shares."""
        view = self.view
        current = obj
        path = CLAIM_SPEC_PATHS[kind] + ("devices",)
        for position, key in enumerate(path):
            child = current.get(key)
            if view.is_null(child):
                return
            current = self.mapping(child, where + ".".join(path[: position + 1]))
        requests_node = current.get("requests")
        if view.is_null(requests_node):
            return
        requests = view.as_list(requests_node)
        if requests is None:
            self.fail("%s%s.requests must be a list" % (where, ".".join(path)), requests_node)
        for position, request_node in enumerate(requests):
            self.step()
            here = "%s%s.requests[%d]" % (where, ".".join(path), position)
            request = self.mapping(request_node, here)
            label = view.as_text(request.get("name")) or str(position)
            exactly = request.get("exactly")
            if not view.is_null(exactly):
                self.check_device_request(obj_node, self.mapping(exactly, here + ".exactly"), here + ".exactly", kind, name, label)
            alternatives = request.get("firstAvailable")
            if view.is_null(alternatives):
                continue
            items = view.as_list(alternatives)
            if items is None:
                self.fail("%s.firstAvailable must be a list" % here, alternatives)
            for index, item in enumerate(items):
                self.step()
                sub = self.mapping(item, "%s.firstAvailable[%d]" % (here, index))
                self.check_device_request(obj_node, sub, "%s.firstAvailable[%d]" % (here, index), kind, name,
                                          "%s/%s" % (label, view.as_text(sub.get("name")) or index))

    def check_device_request(self, obj_node, request, where, kind, name, label):
        view = self.view
        device_class = view.as_text(request.get("deviceClassName"))
        limits = self.claim_limits.get(device_class)
        if limits is None:
            return
        if view.as_text(request.get("allocationMode")) == "All":
            shares = ALL_DEVICES
        else:
            count_node = request.get("count")
            count = 1
            if not view.is_null(count_node):
                count, shown, why = view.quantity(count_node)
                if count is None:
                    self.fail("%s.count is %s, %s" % (where, shown, why), count_node)
            per_device = 1
            asked = {}
            capacity = request.get("capacity")
            if not view.is_null(capacity):
                asked_node = self.mapping(capacity, where + ".capacity").get("requests")
                if not view.is_null(asked_node):
                    asked = self.mapping(asked_node, where + ".capacity.requests")
            for capacity_name, limit in limits.items():
                if capacity_name not in asked:
                    continue
                units, shown, why = view.quantity(asked[capacity_name])
                if units is None:
                    self.fail("%s.capacity.requests[%s] is %s, %s" % (where, capacity_name, shown, why), asked[capacity_name])
                per_device = max(per_device, -(-units // limit))
            shares = count * per_device
        self.found.append({"document": self.document, "kind": kind, "name": name, "container": "%s/%s" % (name, label),
                           "resource": device_class, "count": shares, "field": "claim", "path": where,
                           "object": obj_node if self.view is _ObjectView else None, "pod_spec": None})

    def check_pod_spec(self, obj_node, spec, spec_path, kind, name):
        view = self.view
        for field in CONTAINER_FIELDS:
            containers = spec.get(field)
            if view.is_null(containers):
                continue
            items = view.as_list(containers)
            if items is None:
                self.fail("%s.%s must be a list" % (spec_path, field), containers)
            for position, container in enumerate(items):
                self.step()
                self.check_container(container, "%s.%s[%d]" % (spec_path, field, position), kind, name, obj_node, spec, field)

    def names_gpu(self, spec):
        """True when the Pod spec names a GPU itself (an ``nvidia.com/`` resource in any container, or a claim)."""
        view = self.view
        for field in ("containers", "initContainers"):
            for container in view.as_list(spec.get(field)) or []:
                resources = view.as_map((view.as_map(container) or {}).get("resources")) or {}
                for section in ("limits", "requests"):
                    if any(str(key).startswith(_GPU_PREFIX) for key in view.as_map(resources.get(section)) or {}):
                        return True
        return bool(view.as_list(spec.get("resourceClaims")))

    def check_intent(self, obj_node, template, spec, spec_path, kind, name):
        """A Pod (template) asking by intent: what admission makes of it, from ``self.intents``; its containers checked."""
        view = self.view
        annotations = view.as_map((view.as_map(template.get("metadata")) or {}).get("annotations")) or {}
        if INTENT_ANNOTATION not in annotations:
            return
        intent = view.as_text(annotations.get(INTENT_ANNOTATION)) or ""
        count = view.as_text(annotations.get(COUNT_ANNOTATION)) if COUNT_ANNOTATION in annotations else "1"
        count = "" if count is None else count
        params = self.intents
        key = "intent." + intent.replace("+", "_")
        entry = {"document": self.document, "kind": kind, "name": name, "intent": intent, "count": count, "path": spec_path,
                 "resource": None, "form": None, "containers": [], "refused": None}
        self.asked.append(entry)
        if self.names_gpu(spec):
            entry["refused"] = None
            entry["form"] = "unchanged"
            return
        if key + ".resource" not in params:
            entry["refused"] = "GPU intent '%s' (annotation %s) is given by no pool of this cluster; %s. Fix: ask for one of %s" % (
                intent, INTENT_ANNOTATION, params.get("summary", ""), params.get("intents", ""))
            return
        if not (count.isdigit() and not count.startswith("0") and int(count) <= _MAX_INTENT_COUNT):
            entry["refused"] = "annotation %s must be a whole number from 1 to %d, got '%s'" % (COUNT_ANNOTATION, _MAX_INTENT_COUNT, count)
            return
        most = params.get(key + ".max", "")
        entry["resource"] = params[key + ".resource"]
        entry["form"] = params.get(key + ".form") or "resource"
        if most and int(count) > int(most):
            entry["refused"] = "GPU intent '%s' gives at most %s per container (%s), asked for %s; %s. Fix: ask for at most that many, " \
                "or for an intent that gives more" % (intent, most, entry["resource"], count, params.get("summary", ""))
            return
        containers = [view.as_map(item) or {} for item in view.as_list(spec.get("containers")) or []]
        names = [view.as_text(container.get("name")) or "" for container in containers]
        if CONTAINERS_ANNOTATION in annotations:
            wanted = [part.strip() for part in (view.as_text(annotations.get(CONTAINERS_ANNOTATION)) or "").split(",")]
        else:
            wanted = names
        entry["containers"] = [container for container in names if container in wanted]
        if entry["form"] != "resource":
            return  # a claim: the claim's own request is what is checked
        for container in entry["containers"]:
            if entry["resource"] in self.resources:
                self.found.append({"document": self.document, "kind": kind, "name": name, "container": container,
                                   "resource": entry["resource"], "count": int(count), "field": "intent", "path": spec_path,
                                   "object": obj_node if self.view is _ObjectView else None,
                                   "pod_spec": spec if self.view is _ObjectView else None})

    def check_list(self, obj, where, kind, api_version, depth, seen, top):
        """The items kubectl sends for an object holding ``items``; kind-less items take the list's kind without ``List``."""
        view = self.view
        items_node = obj.get("items")
        if view.is_null(items_node):
            return
        items = view.as_list(items_node)
        if items is None:
            self.fail("%sitems must be a list (kubectl reads any object holding items as a list of objects)" % where, items_node)
        if not top and view.kubectl:
            self.fail("%sitems: a list inside a list's items, which kubectl refuses; put the objects in one list" % where, items_node)
        if depth >= MAX_LIST_DEPTH:
            self.fail("Lists nested deeper than %d levels" % MAX_LIST_DEPTH, items_node)
        item_kind = kind[: -len("List")] if kind.endswith("List") else kind
        for position, item in enumerate(items):
            self.step()
            if id(item) in seen or view.is_null(item):
                continue  # the same object twice (objects given as data may share it)
            seen.add(id(item))
            self.check_object(item, "%sitems[%d]." % (where, position), (item_kind, api_version), depth + 1, seen)

    def check_container(self, node, where, kind, name, obj_node, spec, field):
        view = self.view
        container = self.mapping(node, where)
        container_name = view.as_text(container.get("name")) or where.rsplit(".", 1)[-1]
        resources_node = container.get("resources")
        if view.is_null(resources_node):
            return
        resources = self.mapping(resources_node, where + ".resources")
        counts = self.counts(resources, where + ".resources", node)
        for resource in self.resources:
            if resource in counts:
                self.found.append(
                    {
                        "document": self.document,
                        "kind": kind,
                        "name": name,
                        "container": container_name,
                        "resource": resource,
                        "count": counts[resource],
                        "field": field,
                        "path": where,
                        # data only: keeping composed nodes would keep every document of a large file alive
                        "object": obj_node if self.view is _ObjectView else None,
                        "pod_spec": spec if self.view is _ObjectView else None,
                    }
                )


def check_options(resources, max_per_container):
    """Validate the options of :func:`find_offenders`; return ``(resources tuple, max)`` or raise ValueError."""
    if isinstance(resources, str):
        resources = (resources,)
    resources = tuple(resources)
    if not resources or not all(isinstance(item, str) and item for item in resources):
        raise ValueError("resources must be a non-empty list of resource names, e.g. ['nvidia.com/gpu']")
    if isinstance(max_per_container, bool) or not isinstance(max_per_container, int) or max_per_container < 0:
        raise ValueError("max_per_container must be a non-negative integer, got %r" % (max_per_container,))
    return tuple(dict.fromkeys(str(item) for item in resources)), int(max_per_container)


def check_claim_limits(claim_limits):
    """Validate ``{device class: {capacity: quantity}}``; return it with each quantity in whole units, or raise ValueError.

    A class with no capacity (``{}``) counts devices only.
    """
    if claim_limits is None:
        return {}
    if not isinstance(claim_limits, dict):
        raise ValueError("claim_limits must map a device class to {capacity: quantity}, e.g. {'shared.gpu.nvidia.com': {'memory': '20Gi'}}")
    result = {}
    for device_class, limits in claim_limits.items():
        if not isinstance(device_class, str) or not device_class:
            raise ValueError("claim_limits: %r is not a device class name" % (device_class,))
        if limits is None:
            limits = {}
        if not isinstance(limits, dict):
            raise ValueError("claim_limits[%s] must map a capacity name to a quantity, e.g. {'memory': '20Gi'}" % device_class)
        result[str(device_class)] = {}
        for capacity, quantity in limits.items():
            units, why = whole_units(str(quantity)) if isinstance(quantity, (str, int)) and not isinstance(quantity, bool) else (None, "not a quantity")
            if units is None or units < 1:
                raise ValueError("claim_limits[%s][%s]: %r is %s" % (device_class, capacity, quantity, why or "zero, not a limit"))
            result[str(device_class)][str(capacity)] = units
    return result


def check_intents(intents):
    """Validate what each intent becomes (``intents.params_data``: a flat map of strings); return it, or raise ValueError."""
    if intents is None:
        return None
    if not isinstance(intents, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in intents.items()):
        raise ValueError("intents must map strings to strings (what the intent policies carry, intents.params_data)")
    if "intents" not in intents or "summary" not in intents:
        raise ValueError("intents lacks 'intents' or 'summary': give the whole params map the intent policies carry")
    return dict(intents)


def read_manifest(text_or_stream):
    """Manifest text (``str``, ``bytes`` or a readable stream) as ``str``, size and encoding checked."""
    return _yaml.read_text(text_or_stream)


def _walk(documents_or_text, resources, claim_limits, intents):
    resources, _max = check_options(resources, 0)
    claim_limits = check_claim_limits(claim_limits)
    intents = check_intents(intents)
    if isinstance(documents_or_text, (str, bytes, bytearray)) or hasattr(documents_or_text, "read"):
        text = _yaml.read_text(documents_or_text)
        walker = _Walker(_NodeView, resources, budget=MAX_STEPS + len(text), claim_limits=claim_limits, intents=intents)
        for index, node in _yaml.kubectl_documents(text):
            walker.check_document(index, node)
        return walker
    if isinstance(documents_or_text, dict):
        documents = [documents_or_text]
    elif isinstance(documents_or_text, (list, tuple)):
        documents = documents_or_text
    elif documents_or_text is None:
        documents = []
    else:
        raise ManifestError("expected YAML text, an object or a list of objects, got %s" % type(documents_or_text).__name__)
    walker = _Walker(_ObjectView, resources, claim_limits=claim_limits, intents=intents)
    for index, document in enumerate(documents):
        walker.check_document(index, document)
    return walker


def container_requests(documents_or_text, resources=DEFAULT_RESOURCES, claim_limits=None):
    """Every container that names one of ``resources`` in its limits or requests, with its count.

    ``documents_or_text`` is YAML text (read as kubectl reads it), one object (``dict``) or a list of
    objects. Each entry is ``{"document": 0-based index, "kind", "name", "container", "resource",
    "count" (the larger of limit and request), "field" (containers, initContainers or
    ephemeralContainers), "path", "object", "pod_spec"}``; ``object`` and ``pod_spec`` are the
    dicts when objects were given (None for YAML text). A container found outside any Pod spec in a searched kind
    (an Argo template's ``container``, a Tekton step) has the requirements' field as ``field`` (one of
    :data:`REQUIREMENT_FIELDS`), their path as ``path``, and no ``pod_spec`` (None). With ``claim_limits`` (see :func:`check_claim_limits`),
    each claim request for one of its classes is an entry too: ``container`` is ``<claim>/<request>``, ``resource``
    the device class, ``count`` the shares asked for (:data:`ALL_DEVICES` for ``allocationMode: All``), ``field``
    ``claim``. Raises :class:`ManifestError` for input that cannot be checked.
    """
    return _walk(documents_or_text, resources, claim_limits, None).found


def find_offenders(documents_or_text, resources=DEFAULT_RESOURCES, max_per_container=1, claim_limits=None):
    """List every container that asks for more than ``max_per_container`` of one of ``resources``.

    Input as for :func:`container_requests`. Containers, initContainers and ephemeralContainers
    are checked, in both ``limits`` and ``requests`` (the larger counts). Each offender is
    ``{"document": 0-based index, "kind", "name", "container", "resource", "count"}``. With ``claim_limits``,
    claim requests for a shared class that ask for more than ``max_per_container`` shares are offenders too
    (``container`` is ``<claim>/<request>``). Raises :class:`ManifestError` for unreadable or invalid input,
    ``ValueError`` for bad options.
    """
    return check_manifest(documents_or_text, resources, max_per_container, claim_limits)["offenders"]


def check_manifest(documents_or_text, resources=DEFAULT_RESOURCES, max_per_container=1, claim_limits=None, intents=None):
    """``{"offenders": [...], "intents": [...]}``: :func:`find_offenders`'s list, and with ``intents`` (see
    :func:`check_intents`) one entry per Pod (template) asking by intent: ``{document, kind, name, intent, count,
    resource, form ("resource", "claim" or "unchanged": it names a GPU itself), containers, refused (the reason
    admission refuses it, or None)}``. Its containers are offenders when what they become asks for too much."""
    resources, max_per_container = check_options(resources, max_per_container)
    walker = _walk(documents_or_text, resources, claim_limits, intents)
    offenders = [
        {key: item[key] for key in ("document", "kind", "name", "container", "resource", "count")}
        for item in walker.found
        if item["count"] == ALL_DEVICES or item["count"] > max_per_container
    ]
    return {"offenders": offenders, "intents": walker.asked}
