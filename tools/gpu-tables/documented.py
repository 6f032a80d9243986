# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA's documented MIG geometry (mig-geometry.yaml beside this file): its strict loader and a placement search.

``load(path)`` reads the file and checks it strictly (the file's header says what each field means): the exact keys,
the types, the units, and that every source names a document of ``documents:``. It raises ``ValueError`` listing every
problem, each naming the product, the profile and the field, and what to write instead.

``fits(product, layout)`` says whether a layout of GPU instances (``{profile name: count}``) can be created on one GPU
of ``product`` (a row of the loaded file), by searching the documented placements on the memory-slice axis. It is
written from the data file alone and shares no code with the collection's own model (plugins/module_utils/hardware),
so that it can check it.

Standard library and PyYAML only.
"""

from __future__ import annotations

import re
from fractions import Fraction

import yaml

TOP_KEYS = frozenset(("documents", "products"))
DOCUMENT_KEYS = frozenset(("title", "url", "repo", "path", "commit", "note"))
PRODUCT_KEYS = frozenset((
    "product", "nvml_name", "nvml_name_sources", "architecture", "pci_device_id", "pci_device_id_sources", "memory_gb", "memory_mib",
    "memory_mib_sources", "compute_slices", "memory_slices", "max_gpu_instances", "supported_gpus_row", "supported_gpus_source", "notes",
    "profiles"))
PROFILE_KEYS = frozenset(("name", "fractions", "engines", "instances", "placements", "placements_source", "nvidia_smi_profile_id", "source"))
PROFILE_OPTIONAL_KEYS = frozenset(("notes",))
FRACTION_KEYS = frozenset(("memory", "sm", "l2"))
ENGINE_KEYS = frozenset(("decoders", "encoders", "jpeg", "ofa", "copy"))
SOURCE_KEYS = frozenset(("document", "section"))

DOCUMENT_KEY = re.compile(r"^[a-z0-9][a-z0-9-]*$")
PRODUCT_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+-]*$")
PCI_ID = re.compile(r"^0x[0-9a-f]{4}10de$")
FRACTION = re.compile(r"^([0-9]+)/([0-9]+)$")
PROFILE_NAME = re.compile(r"^([1-9][0-9]*)g\.[0-9]+gb(\+me|\+me\.all|\+gfx|-me)?$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")
REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
INFERRED = "inferred-from "
INSTANCE_COUNT = "instance-count"


def load(path):
    """The data file at ``path`` as a dict, after checking it strictly; ``ValueError`` lists every problem found."""
    with open(path, encoding="utf-8") as stream:
        data = yaml.load(stream, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml's loader when PyYAML has it: 20 times faster
    errors = []
    _check(data, errors)
    if errors:
        raise ValueError("%s: %d problem(s):\n%s" % (path, len(errors), "\n".join("  " + error for error in errors)))
    return data


def compute_slices(profile_name):
    """The compute slices of a profile: the ``<n>`` of its name's ``<n>g``."""
    match = PROFILE_NAME.match(profile_name)
    if not match:
        raise ValueError("%r is not a MIG profile name (<n>g.<m>gb with an optional +me, +me.all, +gfx or -me)" % (profile_name,))
    return int(match.group(1))


def media_extended(profile_name):
    """Whether the profile takes the GPU's media extension (+me or +me.all): the guide allows one such instance per GPU."""
    return "+me" in profile_name


def fraction(text):
    """A fraction "n/d" of the file as (n, d)."""
    match = FRACTION.match(text)
    return int(match.group(1)), int(match.group(2))


def fits(product, layout):
    """Whether ``layout`` ({profile name: count}) can be created on one GPU of ``product`` (a row of the loaded file).

    Returns ``(True, where)`` with the start of each instance, or ``(False, reason)``: an unknown profile, more than one
    media-extended (+me, +me.all) instance, more compute slices than the GPU has, more memory slices than it has, or
    (when both suffice) no combination of the documented placements that holds every instance without overlap. The
    documented ``instances`` are not consulted: they are what this search must reproduce.
    """
    profiles = {profile["name"]: profile for profile in product["profiles"]}
    wanted = [(name, count) for name, count in sorted(layout.items()) if count]
    for name, count in wanted:
        if name not in profiles:
            return False, "%s has no profile %s (its profiles: %s)" % (product["product"], name, ", ".join(profiles))
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            return False, "%s: the count %r is not a whole number >= 0" % (name, count)
    if not wanted:
        return True, "nothing to place"
    problems = []
    media = [(name, count) for name, count in wanted if media_extended(name)]
    if sum(count for name, count in media) > 1:
        problems.append("%d media-extended instances (%s), while a GPU has one media extension" % (
            sum(count for name, count in media), _terms(media)))
    compute = sum(compute_slices(name) * count for name, count in wanted)
    if compute > product["compute_slices"]:
        problems.append("needs %d of %d compute slices (%s)" % (
            compute, product["compute_slices"], _terms(wanted, compute_slices)))
    memory = sum(_size(profiles[name]) * count for name, count in wanted)
    if memory > product["memory_slices"]:
        problems.append("needs %d of %d memory slices (%s)" % (memory, product["memory_slices"], _terms(wanted, lambda name: _size(profiles[name]))))
    if problems:
        return False, "; ".join(problems)
    placed = _search(product["memory_slices"], [(name, profiles[name]["placements"], count) for name, count in wanted])
    if placed is None:
        return False, "needs %d of %d memory slices, but no combination of the documented placements holds them (%s)" % (
            memory, product["memory_slices"], "; ".join("%s at %s" % (name, _placements_text(profiles[name]["placements"])) for name, count in wanted))
    return True, ", ".join("%s at %s" % (name, "/".join(str(start) for start in starts)) for name, starts in placed)


def _size(profile):
    return profile["placements"][0][1]


def _terms(items, per=None):
    """'4 x 1g.20gb at 2 each + 3g.40gb at 4' (with ``per``), or '4 x 1g.20gb + 3g.40gb'."""
    terms = []
    for name, count in items:
        term = name if count == 1 else "%d x %s" % (count, name)
        if per is not None:
            term += " at %d%s" % (per(name), " each" if count > 1 else "")
        terms.append(term)
    return " + ".join(terms)


def _placements_text(placements):
    return "{%s}:%d" % (",".join(str(placement[0]) for placement in placements), placements[0][1])


def _search(slices, wanted):
    """Starts for every instance ([(name, [start, ...])]) with no two overlapping, or None; largest profiles first."""
    order = sorted(wanted, key=lambda item: -item[1][0][1])
    instances = [(name, index) for name, placements, count in order for index in range(count)]
    options = {name: [tuple(placement) for placement in placements] for name, placements, count in order}
    chosen = []

    def place(position, used):
        if position == len(instances):
            return True
        name, index = instances[position]
        # Instances of one profile take placements in increasing order: the search does not try their permutations.
        first = chosen[-1][1] + 1 if index and chosen and chosen[-1][0] == name else 0
        for option in range(first, len(options[name])):
            start, size = options[name][option]
            mask = ((1 << size) - 1) << start
            if start + size <= slices and not used & mask:
                chosen.append((name, option))
                if place(position + 1, used | mask):
                    return True
                chosen.pop()
        return False

    if not place(0, 0):
        return None
    starts = {}
    for name, option in chosen:
        starts.setdefault(name, []).append(options[name][option][0])
    return [(name, sorted(starts[name])) for name, placements, count in order]


# The checks. Each appends "<where>: <problem>; <fix>" to errors.

def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _keys(where, value, required, optional, errors):
    if not isinstance(value, dict):
        errors.append("%s: expected a mapping with the keys %s, found %s" % (where, ", ".join(sorted(required)), type(value).__name__))
        return False
    missing = sorted(required - set(value))
    extra = sorted(set(value) - required - optional)
    if missing:
        errors.append("%s: missing key(s) %s; add them (null where a value is not known)" % (where, ", ".join(missing)))
    if extra:
        errors.append("%s: unknown key(s) %s; the keys are %s" % (where, ", ".join(map(str, extra)), ", ".join(sorted(required | optional))))
    return not missing


def _string(where, value, errors, nullable=False):
    if value is None and nullable:
        return
    if not isinstance(value, str) or not value.strip():
        errors.append("%s: expected a non-empty string%s, found %r" % (where, " or null" if nullable else "", value))


def _count(where, value, errors, minimum=0, nullable=False):
    if value is None and nullable:
        return
    if not _is_int(value) or value < minimum:
        errors.append("%s: expected a whole number >= %d%s, found %r" % (where, minimum, " or null" if nullable else "", value))


def _document_ref(where, value, documents, errors):
    if not isinstance(value, str) or value not in documents:
        errors.append("%s: %r is not a key of documents:; name one of them or add the document there" % (where, value))


def _sources(where, value, documents, errors):
    if not isinstance(value, list):
        errors.append("%s: expected a list of document keys ([] when there is none), found %r" % (where, value))
        return []
    for index, key in enumerate(value):
        _document_ref("%s[%d]" % (where, index), key, documents, errors)
    if len(set(map(str, value))) != len(value):
        errors.append("%s: a document is listed twice; list each once" % (where,))
    return value


def _source(where, value, documents, errors):
    if _keys(where, value, SOURCE_KEYS, frozenset(), errors):
        _document_ref(where + ".document", value["document"], documents, errors)
        _string(where + ".section", value["section"], errors)


def _notes(where, value, errors):
    if not isinstance(value, list) or not all(isinstance(note, str) and note.strip() for note in value):
        errors.append("%s: expected a list of non-empty strings ([] when there is none), found %r" % (where, value))


def _check(data, errors):
    if not _keys("the file", data, TOP_KEYS, frozenset(), errors):
        return
    documents = data["documents"]
    if not isinstance(documents, dict) or not documents:
        errors.append("documents: expected a mapping of document keys to documents, found %r" % (documents,))
        documents = {}
    for key, document in documents.items():
        _check_document(key, document, errors)
    products = data["products"]
    if not isinstance(products, list) or not products:
        errors.append("products: expected a list of product rows, found %r" % (products,))
        return
    names = {}
    for index, product in enumerate(products):
        key = product.get("product") if isinstance(product, dict) else None
        where = "products[%s]" % (key if isinstance(key, str) else index)
        if isinstance(key, str):
            if key in names:
                errors.append("%s: the product is listed twice (rows %d and %d); keep one row" % (where, names[key], index))
            names[key] = index
        _check_product(where, product, documents, errors)
    by_name = {product["product"]: product for product in products if isinstance(product, dict) and isinstance(product.get("product"), str)}
    for product in by_name.values():
        _check_inferences(product, by_name, documents, errors)


def _check_document(key, document, errors):
    where = "documents.%s" % (key,)
    if not isinstance(key, str) or not DOCUMENT_KEY.match(key):
        errors.append("%s: a document key is lower case letters, digits and '-'" % (where,))
    if not _keys(where, document, DOCUMENT_KEYS, frozenset(), errors):
        return
    _string(where + ".title", document["title"], errors)
    _string(where + ".note", document["note"], errors)
    for field in ("url", "repo", "path", "commit"):
        _string("%s.%s" % (where, field), document[field], errors, nullable=True)
    if isinstance(document["url"], str) and not document["url"].startswith("https://"):
        errors.append("%s.url: %r is not an https:// URL" % (where, document["url"]))
    if isinstance(document["repo"], str) and not REPO.match(document["repo"]):
        errors.append("%s.repo: %r is not a GitHub owner/name" % (where, document["repo"]))
    if document["repo"] is not None and document["path"] is None:
        errors.append("%s.path: a document in a repository names its path there" % (where,))
    if isinstance(document["commit"], str) and not COMMIT.match(document["commit"]):
        errors.append("%s.commit: %r is not a 40-digit commit hash" % (where, document["commit"]))
    if document["commit"] is not None and document["repo"] is None:
        errors.append("%s.commit: a commit needs the repo it is in" % (where,))


def _check_product(where, product, documents, errors):
    if not _keys(where, product, PRODUCT_KEYS, frozenset(), errors):
        return
    key = product["product"]
    if not isinstance(key, str) or not PRODUCT_KEY.match(key) or key.startswith("NVIDIA-"):
        errors.append("%s.product: %r is not a product label without NVIDIA- (letters, digits, '.', '+', '-'; spaces written '-')" % (where, key))
    name = product["nvml_name"]
    _string(where + ".nvml_name", name, errors, nullable=True)
    if isinstance(name, str) and isinstance(key, str):
        if not name.startswith("NVIDIA "):
            errors.append("%s.nvml_name: %r does not start with 'NVIDIA ' as NVML's names do" % (where, name))
        elif name[len("NVIDIA "):].replace(" ", "-") != key:
            errors.append("%s.product: %r is not the label of its nvml_name %r (write %r)" % (
                where, key, name, name[len("NVIDIA "):].replace(" ", "-")))
    _sources(where + ".nvml_name_sources", product["nvml_name_sources"], documents, errors)
    if name is None and product["nvml_name_sources"]:
        errors.append("%s.nvml_name_sources: a null nvml_name has no sources; write [] or the name" % (where,))
    _string(where + ".architecture", product["architecture"], errors)
    pci = product["pci_device_id"]
    if pci is not None and (not isinstance(pci, str) or not PCI_ID.match(pci)):
        errors.append("%s.pci_device_id: %r is not 0x<device><vendor 10de> in lower case (e.g. \"0x233010de\") or null" % (where, pci))
    for field, value in (("pci_device_id", pci), ("memory_mib", product["memory_mib"])):
        sources = _sources("%s.%s_sources" % (where, field), product[field + "_sources"], documents, errors)
        if isinstance(sources, list) and (value is None) != (not sources):
            errors.append("%s.%s_sources: %s" % (where, field, "a null %s has no sources; write []" % field if value is None else
                                                 "%s %r needs the document(s) it is read in; a value no document shows is null" % (field, value)))
    _count(where + ".memory_gb", product["memory_gb"], errors, 1)
    _count(where + ".memory_mib", product["memory_mib"], errors, 1, nullable=True)
    for field in ("compute_slices", "memory_slices", "max_gpu_instances"):
        _count("%s.%s" % (where, field), product[field], errors, 1)
    _string(where + ".supported_gpus_row", product["supported_gpus_row"], errors)
    _source(where + ".supported_gpus_source", product["supported_gpus_source"], documents, errors)
    _notes(where + ".notes", product["notes"], errors)
    profiles = product["profiles"]
    if not isinstance(profiles, list) or not profiles:
        errors.append("%s.profiles: expected a list of profile rows, found %r" % (where, profiles))
        return
    seen = set()
    for index, profile in enumerate(profiles):
        name = profile.get("name") if isinstance(profile, dict) else None
        at = "%s.profiles[%s]" % (where, name if isinstance(name, str) else index)
        if isinstance(name, str):
            if name in seen:
                errors.append("%s: the profile is listed twice; keep one row" % (at,))
            seen.add(name)
        _check_profile(at, profile, product, documents, errors)


def _check_profile(where, profile, product, documents, errors):
    if not _keys(where, profile, PROFILE_KEYS, PROFILE_OPTIONAL_KEYS, errors):
        return
    name = profile["name"]
    match = PROFILE_NAME.match(name) if isinstance(name, str) else None
    if not match:
        errors.append("%s.name: %r is not a MIG profile name (<n>g.<m>gb with an optional +me, +me.all, +gfx or -me)" % (where, name))
    elif _is_int(product["compute_slices"]) and int(match.group(1)) > product["compute_slices"]:
        errors.append("%s.name: %s takes more compute slices than the product's %d" % (where, name, product["compute_slices"]))
    if _keys(where + ".fractions", profile["fractions"], FRACTION_KEYS, frozenset(), errors):
        for field in sorted(FRACTION_KEYS):
            value = profile["fractions"][field]
            parts = FRACTION.match(value) if isinstance(value, str) else None
            if not parts or not 0 < int(parts.group(1)) <= int(parts.group(2)):
                errors.append("%s.fractions.%s: %r is not a fraction \"n/d\" with 0 < n <= d; write it as the guide prints it (\"Full\" as d/d)" % (
                    where, field, value))
            elif field == "sm" and match and _is_int(product["compute_slices"]) and (
                    Fraction(int(parts.group(1)), int(parts.group(2))) != Fraction(int(match.group(1)), product["compute_slices"])):
                errors.append("%s.fractions.sm: %r is not %s's %s of the product's %d compute slices" % (
                    where, value, name, match.group(1), product["compute_slices"]))
    if _keys(where + ".engines", profile["engines"], ENGINE_KEYS, frozenset(), errors):
        for field in sorted(ENGINE_KEYS):
            _count("%s.engines.%s" % (where, field), profile["engines"][field], errors, 0, nullable=True)
    _count(where + ".instances", profile["instances"], errors, 1)
    _check_placements(where, profile, product, errors)
    _count(where + ".nvidia_smi_profile_id", profile["nvidia_smi_profile_id"], errors, 0, nullable=True)
    _source(where + ".source", profile["source"], documents, errors)
    if "notes" in profile:
        _notes(where + ".notes", profile["notes"], errors)


def _check_placements(where, profile, product, errors):
    placements = profile["placements"]
    slices = product["memory_slices"] if _is_int(product["memory_slices"]) else None
    if not isinstance(placements, list) or not placements:
        errors.append("%s.placements: expected a list of [start, size] pairs, found %r" % (where, placements))
        return
    for placement in placements:
        if not (isinstance(placement, list) and len(placement) == 2 and all(_is_int(part) for part in placement)):
            errors.append("%s.placements: %r is not a [start, size] pair of whole numbers" % (where, placement))
            return
        start, size = placement
        if start < 0 or size < 1 or (slices is not None and start + size > slices):
            errors.append("%s.placements: [%r, %r] is not inside the product's memory slices [0, %s); start >= 0, size >= 1, start + size <= %s" % (
                where, start, size, slices, slices))
    if len({placement[1] for placement in placements}) != 1:
        errors.append("%s.placements: the sizes differ (%r); one profile has one size" % (where, placements))
    if len({tuple(placement) for placement in placements}) != len(placements):
        errors.append("%s.placements: a placement is listed twice" % (where,))
    if _is_int(profile["instances"]) and profile["instances"] > len(placements):
        errors.append("%s.instances: %d instances but only %d placements" % (where, profile["instances"], len(placements)))
    source = profile["placements_source"]
    if isinstance(source, list):
        if not source:
            errors.append("%s.placements_source: an empty list; name the document(s) printing the placements or write inferred-from" % (where,))
    elif not (isinstance(source, str) and source.startswith(INFERRED) and source[len(INFERRED):].strip()):
        errors.append("%s.placements_source: %r is neither a list of document keys nor \"inferred-from <product|document|instance-count>\"" % (
            where, source))


def _check_inferences(product, by_name, documents, errors):
    """placements_source: document keys exist; inferred-from names a document, instance-count or another product with the same placements."""
    if not isinstance(product.get("profiles"), list):
        return
    for profile in product["profiles"]:
        if not isinstance(profile, dict) or "placements_source" not in profile:
            continue
        where = "products[%s].profiles[%s].placements_source" % (product["product"], profile.get("name"))
        source = profile["placements_source"]
        if isinstance(source, list):
            _sources(where, source, documents, errors)
            continue
        if not isinstance(source, str) or not source.startswith(INFERRED):
            continue
        origin = source[len(INFERRED):].strip()
        if origin == INSTANCE_COUNT or origin in documents:
            continue
        if origin == product["product"]:
            errors.append("%s: a product cannot infer its placements from itself" % (where,))
        elif origin not in by_name:
            errors.append("%s: %r is no product, no key of documents: and not %s" % (where, origin, INSTANCE_COUNT))
        elif not any(isinstance(other, dict) and other.get("placements") == profile.get("placements") for other in by_name[origin].get("profiles") or ()):
            errors.append("%s: %s has no profile with the placements %r; infer from a product that has them" % (where, origin, profile.get("placements")))
