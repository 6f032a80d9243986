# -*- coding: utf-8 -*-
# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Write manifest files and apply them, in one call (module gpushare.k8s.manifests, role gpushare.k8s.manifest).

Each manifest is read first with the collection's safe reader (``preflight.manifest_objects``: invalid YAML,
tags that build objects, alias bombs and documents that are not objects fail here), so bad input writes no
file and changes nothing. Then the files are written (``lab_files.write_files``, each only when it differs)
and the objects applied with kubernetes.core's logic (``k8s_objects.run_objects``: create, or strategic
merge patch that keeps what other tools added).

In check mode nothing is written: the files are compared, and the objects are sent to the API server as a
dry run, except those of a manifest whose namespace does not exist yet (a run would create it first); those
are reported as objects that would be created. No Ansible controller import: pytest calls it.
"""

from __future__ import annotations

import copy

from ..errors import InputError
from ..k8s.auth import AUTH_ARG_SPEC
from ..k8s.objects import LOCK_ARG_SPEC, OBJECTS_ARG_SPEC, LockError, held, run_objects, run_objects_info
from ..files import write_files
from ..k8s.manifest_yaml import ManifestError
from ..k8s.manifest_checks import manifest_objects

__all__ = ["MANIFESTS_ARG_SPEC", "run_manifests"]

MANIFESTS_ARG_SPEC = dict(
    copy.deepcopy(AUTH_ARG_SPEC),
    manifests=dict(type="list", elements="dict", required=True, options=dict(
        path=dict(type="str", default=""),
        content=dict(type="str", required=True),
        namespace=dict(type="str", default=""),
        mode=dict(type="str", default="0644"),
        apply=dict(type="bool", default=True),
    )),
    directory_mode=dict(type="str", default="0755"),
    lock=dict(type="dict", options=copy.deepcopy(LOCK_ARG_SPEC)),
)

# What run_objects reads besides the definitions: the defaults of gpushare.k8s.objects' options.
_APPLY_DEFAULTS = {key: spec.get("default") for key, spec in OBJECTS_ARG_SPEC.items()}


def _label(index, manifest):
    return "manifests[%d]%s" % (index, " (%s)" % manifest["path"] if manifest.get("path") else "")


def _namespaces(objects, default):
    """The namespaces a manifest's objects go to (an object's own, else the manifest's), in order."""
    seen = []
    for obj in objects:
        namespace = (obj.get("metadata") or {}).get("namespace") or default
        if namespace and namespace not in seen:
            seen.append(namespace)
    return seen


def _object_names(objects):
    return ", ".join("%s %s" % (obj.get("kind"), (obj.get("metadata") or {}).get("name")) for obj in objects)


def run_manifests(params, check_mode=False, diff=False):
    """Write every manifest of ``params["manifests"]`` that names a path, then apply each one's objects (unless ``apply`` is false), in order.

    Returns the task's result: ``changed``, ``manifests`` (one entry per manifest: ``path``, ``file_changed``,
    ``changed``, ``objects`` with ``kind``, ``name``, ``namespace``, ``method`` and ``changed`` per object, and in
    check mode ``missing_namespaces``), ``diff`` (files, then objects) with ``diff``, ``msg`` naming what check mode
    would create in namespaces that do not exist yet; or ``failed`` and ``msg``.
    """
    manifests = params["manifests"]
    parsed = []
    for index, manifest in enumerate(manifests):
        try:
            parsed.append(manifest_objects(manifest["content"]))
        except ManifestError as exc:
            return dict(failed=True, changed=False, msg="%s.content: manifest: %s" % (_label(index, manifest), exc))
        if not manifest.get("apply", True) and not manifest.get("path"):
            return dict(failed=True, changed=False, msg="%s: apply is false and no path is given, so nothing would be done. Fix: set "
                                                        "path to write the file, or drop apply: false" % _label(index, manifest))
    if not params.get("lock") or check_mode:  # a dry run writes nothing, so it takes no turn
        return _write_and_apply(params, parsed, check_mode, diff)
    try:
        with held({key: params.get(key) for key in AUTH_ARG_SPEC}, params["lock"]):
            return _write_and_apply(params, parsed, check_mode, diff)
    except LockError as exc:
        return dict(failed=True, changed=False, msg=str(exc))


def _write_and_apply(params, parsed, check_mode, diff):
    manifests = params["manifests"]
    with_path = [index for index, manifest in enumerate(manifests) if manifest.get("path")]
    files = [dict(dest=manifests[i]["path"], content=manifests[i]["content"], mode=manifests[i].get("mode")) for i in with_path]
    try:
        written = write_files(files, params.get("directory_mode") or "0755", check_mode=check_mode,
                              fields=["manifests[%d]" % i for i in with_path], dest_option="path")
    except InputError as exc:
        return dict(failed=True, changed=False, msg=str(exc))
    except OSError as exc:
        return dict(failed=True, changed=False, msg="writing the manifests failed: %s" % exc)
    by_path = iter(written)
    auth = {key: params.get(key) for key in AUTH_ARG_SPEC}
    results, diffs, warnings, messages = [], [], [], []
    for manifest, objects in zip(manifests, parsed):
        file_result = next(by_path) if manifest.get("path") else None
        entry = dict(path=file_result["dest"] if file_result else "", file_changed=bool(file_result and file_result["changed"]),
                     objects=[])
        if file_result and file_result["changed"]:
            diffs.append(file_result["diff"])
        results.append(entry)
        if not manifest.get("apply", True):  # written (and its objects checked) only
            entry["changed"] = entry["file_changed"]
            continue
        if check_mode:
            namespaces = _namespaces(objects, manifest.get("namespace"))
            if namespaces:
                found = run_objects_info(dict(auth, queries=[dict(kind="Namespace", api_version="v1", name=name) for name in namespaces]),
                                         check_mode=True)
                if found.get("failed"):
                    return dict(found, changed=False, manifests=results)
                missing = [each["item"]["name"] for each in found["results"] if not each.get("resources")]
                if missing:
                    entry.update(changed=True, missing_namespaces=missing)
                    messages.append("Would create %s in namespace %s, which does not exist yet." % (_object_names(objects), ", ".join(missing)))
                    diffs.extend(dict(before={}, after=obj) for obj in objects)
                    continue
        if not objects:
            entry["changed"] = entry["file_changed"]
            continue
        applied = run_objects(dict(_APPLY_DEFAULTS, **auth, resource_definition=objects, namespace=manifest.get("namespace") or None),
                              check_mode=check_mode, diff=diff)
        warnings.extend(applied.get("warnings") or [])
        if applied.get("failed"):
            applied.pop("failed")
            return dict(applied, failed=True, changed=any(r.get("changed") for r in results) or entry["file_changed"], manifests=results,
                        msg="%s: %s" % (_label(len(results) - 1, manifest), applied.get("msg", "")))
        each = applied["result"]["results"] if len(objects) > 1 else [applied]
        for obj, outcome in zip(objects, each):
            metadata = obj.get("metadata") or {}
            entry["objects"].append(dict(kind=obj.get("kind"), name=metadata.get("name"),
                                         namespace=metadata.get("namespace") or manifest.get("namespace") or None,
                                         method=outcome.get("method"), changed=bool(outcome.get("changed"))))
            if outcome.get("diff"):
                diffs.append(outcome["diff"])
        entry["changed"] = entry["file_changed"] or any(o["changed"] for o in entry["objects"])
    result = dict(changed=any(entry.get("changed") for entry in results), manifests=results)
    if diff and diffs:
        result["diff"] = diffs
    if warnings:
        result["warnings"] = warnings
    if messages:
        result["msg"] = " ".join(messages)
    return result
