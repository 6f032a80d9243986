# Copyright: contributors to the gpushare.k8s collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA's documented MIG geometry (tools/gpu-tables/mig-geometry.yaml) against itself and against the hardware tables.

The data file is loaded by its strict loader (tools/gpu-tables/documented.py), whose placement search ``fits`` is
written from the data file alone. Three things are checked here:

* the file loads, and a malformed file is refused with the product, profile and field named;
* the file is consistent: for every product and profile, the documented instance count is what ``fits`` places of that
  profile alone (and one more does not fit). The table of every product and profile is shown as a warning;
* the collection's hardware tables (plugins/module_utils/hardware/tables.py, generated from go-nvml's mock) differ from
  the documented geometry where NVIDIA's documents say otherwise. The disagreements are shown as a warning; the test
  asserts the ones known (the Hopper and Blackwell placements the mock makes by compute slices) are found.
"""

from __future__ import annotations

import copy
import importlib.util
import itertools
import warnings
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpushare.k8s.plugins.module_utils.hardware import tables

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tools" / "gpu-tables" / "mig-geometry.yaml"
_SPEC = importlib.util.spec_from_file_location("documented", REPO / "tools" / "gpu-tables" / "documented.py")
documented = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(documented)

GEOMETRY = documented.load(DATA)
RAW = copy.deepcopy(GEOMETRY)
PRODUCTS = {product["product"]: product for product in GEOMETRY["products"]}
ROWS = [(product["product"], profile["name"]) for product in GEOMETRY["products"] for profile in product["profiles"]]

# tables.py's product -> the data file's. tables.py keys a product by go-nvml's mock name (its GFD label without
# NVIDIA-); the data file by the name NVML gives the real GPU. They differ where the mock invents a name: the mock calls
# the H200 "NVIDIA H200 141GB HBM3e" and the B200 "NVIDIA B200 180GB HBM3e" (NVML: "NVIDIA H200", "NVIDIA B200"), the A30
# "NVIDIA A30-PCIE-24GB" (believed "NVIDIA A30") and the A100 80GB PCIe "NVIDIA A100-PCIE-80GB" (believed "NVIDIA A100
# 80GB PCIe"). The other A100s and the H100 80GB HBM3 have the same name in both.
MOCK_TO_DOCUMENTED = {
    "A100-PCIE-40GB": "A100-PCIE-40GB",
    "A100-PCIE-80GB": "A100-80GB-PCIe",
    "A100-SXM4-40GB": "A100-SXM4-40GB",
    "A100-SXM4-80GB": "A100-SXM4-80GB",
    "A30-PCIE-24GB": "A30",
    "B200-180GB-HBM3e": "B200",
    "H100-80GB-HBM3": "H100-80GB-HBM3",
    "H200-141GB-HBM3e": "H200",
}
DOCUMENTED_TO_MOCK = {value: key for key, value in MOCK_TO_DOCUMENTED.items()}
# The engines compared: tables.py's field -> the data file's.
ENGINES = (("decoders", "decoders"), ("jpeg_engines", "jpeg"), ("ofa_engines", "ofa"), ("copy_engines", "copy"))


def test_the_data_file_loads():
    assert len(GEOMETRY["products"]) == 20 and len(ROWS) == 149
    assert set(MOCK_TO_DOCUMENTED) == set(tables.PRODUCTS), "a product of tables.py has no counterpart named here"
    assert set(MOCK_TO_DOCUMENTED.values()) <= set(PRODUCTS)


def _product(data, name):
    return next(product for product in data["products"] if product["product"] == name)


def _profile(data, product, name):
    return next(profile for profile in _product(data, product)["profiles"] if profile["name"] == name)


def _set(path, value):
    def change(data):
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


H100 = "H100-80GB-HBM3"
MALFORMED = {
    "missing product key": (lambda data: _product(data, H100).pop("memory_mib"), "products[H100-80GB-HBM3]: missing key(s) memory_mib"),
    "extra profile key": (lambda data: _profile(data, H100, "1g.20gb").update(mig=True), "products[H100-80GB-HBM3].profiles[1g.20gb]: unknown key(s) mig"),
    "missing document key": (lambda data: data["documents"]["pciids"].pop("commit"), "documents.pciids: missing key(s) commit"),
    "extra top-level key": (lambda data: data.update(servers=[]), "the file: unknown key(s) servers"),
    "fraction above 1": (lambda data: _profile(data, H100, "1g.20gb")["fractions"].update(memory="5/4"),
                         "products[H100-80GB-HBM3].profiles[1g.20gb].fractions.memory: '5/4' is not a fraction"),
    "fraction as the guide's Full": (lambda data: _profile(data, H100, "7g.80gb")["fractions"].update(l2="Full"),
                                     "products[H100-80GB-HBM3].profiles[7g.80gb].fractions.l2: 'Full' is not a fraction"),
    "SM fraction not the name's": (lambda data: _profile(data, H100, "3g.40gb")["fractions"].update(sm="4/7"),
                                   "products[H100-80GB-HBM3].profiles[3g.40gb].fractions.sm: '4/7' is not 3g.40gb's 3"),
    "placement outside": (lambda data: _profile(data, H100, "1g.20gb").update(placements=[[0, 2], [2, 2], [4, 2], [7, 2]]),
                          "products[H100-80GB-HBM3].profiles[1g.20gb].placements: [7, 2] is not inside the product's memory slices [0, 8)"),
    "placements of two sizes": (lambda data: _profile(data, H100, "3g.40gb").update(placements=[[0, 3], [4, 4]]),
                                "products[H100-80GB-HBM3].profiles[3g.40gb].placements: the sizes differ"),
    "unknown source": (lambda data: _profile(data, H100, "2g.20gb")["source"].update(document="nvidia-forum"),
                       "products[H100-80GB-HBM3].profiles[2g.20gb].source.document: 'nvidia-forum' is not a key of documents:"),
    "unknown placements source": (lambda data: _profile(data, H100, "2g.20gb").update(placements_source=["nvidia-forum"]),
                                  "products[H100-80GB-HBM3].profiles[2g.20gb].placements_source[0]: 'nvidia-forum' is not a key of documents:"),
    "inferred from nothing": (lambda data: _profile(data, "H200", "2g.35gb").update(placements_source="inferred-from H300"),
                              "products[H200].profiles[2g.35gb].placements_source: 'H300' is no product"),
    "inferred from a product without those placements": (
        lambda data: _profile(data, "H200", "3g.71gb").update(placements_source="inferred-from A30"),
        "products[H200].profiles[3g.71gb].placements_source: A30 has no profile with the placements [[0, 4], [4, 4]]"),
    "duplicate profile": (lambda data: _product(data, H100)["profiles"].append(copy.deepcopy(_profile(data, H100, "1g.20gb"))),
                          "products[H100-80GB-HBM3].profiles[1g.20gb]: the profile is listed twice"),
    "duplicate product": (lambda data: data["products"].append(copy.deepcopy(_product(data, "B200"))), "products[B200]: the product is listed twice"),
    "PCI id without the vendor": (lambda data: _product(data, H100).update(pci_device_id="0x2330"),
                                  "products[H100-80GB-HBM3].pci_device_id: '0x2330' is not 0x<device><vendor 10de>"),
    "PCI id of another vendor": (lambda data: _product(data, H100).update(pci_device_id="0x233010df"),
                                 "products[H100-80GB-HBM3].pci_device_id: '0x233010df'"),
    "PCI id in upper case": (lambda data: _product(data, H100).update(pci_device_id="0x233010DE"),
                             "products[H100-80GB-HBM3].pci_device_id: '0x233010DE'"),
    "no instance": (lambda data: _profile(data, H100, "4g.40gb").update(instances=0),
                    "products[H100-80GB-HBM3].profiles[4g.40gb].instances: expected a whole number >= 1, found 0"),
    "instances as a boolean": (lambda data: _profile(data, H100, "4g.40gb").update(instances=True),
                               "products[H100-80GB-HBM3].profiles[4g.40gb].instances: expected a whole number >= 1, found True"),
    "more instances than placements": (lambda data: _profile(data, H100, "4g.40gb").update(instances=2),
                                       "products[H100-80GB-HBM3].profiles[4g.40gb].instances: 2 instances but only 1 placements"),
    "memory without its source": (lambda data: _product(data, "H200").update(memory_mib=143771),
                                  "products[H200].memory_mib_sources: memory_mib 143771 needs the document(s) it is read in"),
    "label not the NVML name's": (lambda data: _product(data, "B200").update(product="B200-180GB-HBM3e"),
                                  "products[B200-180GB-HBM3e].product: 'B200-180GB-HBM3e' is not the label of its nvml_name 'NVIDIA B200' (write 'B200')"),
    "profile name": (lambda data: _profile(data, H100, "1g.10gb").update(name="MIG 1g.10gb"),
                     "products[H100-80GB-HBM3].profiles[MIG 1g.10gb].name: 'MIG 1g.10gb' is not a MIG profile name"),
    "engine count as text": (lambda data: _profile(data, H100, "7g.80gb")["engines"].update(ofa="1"),
                             "products[H100-80GB-HBM3].profiles[7g.80gb].engines.ofa: expected a whole number >= 0 or null, found '1'"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_file_is_refused_naming_the_field(case, tmp_path):
    change, message = MALFORMED[case]
    data = copy.deepcopy(RAW)
    change(data)
    path = tmp_path / "mig-geometry.yaml"
    path.write_text(yaml.dump(data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False))
    with pytest.raises(ValueError) as raised:
        documented.load(path)
    assert message in str(raised.value), str(raised.value)


@pytest.mark.parametrize("product, profile", ROWS, ids=["%s:%s" % row for row in ROWS])
def test_the_documented_instances_are_what_the_placements_hold(product, profile):
    """The oracle on the data's own consistency: ``instances`` of a profile fit alone, one more does not."""
    row = PRODUCTS[product]
    count = next(entry["instances"] for entry in row["profiles"] if entry["name"] == profile)
    fit, where = documented.fits(row, {profile: count})
    assert fit, where
    fit, reason = documented.fits(row, {profile: count + 1})
    assert not fit, "%d x %s fit on %s (%s): the documented instances (%d) are too few" % (count + 1, profile, product, reason, count)


def _mock_profile(mock_product, name):
    return next((profile for profile in tables.PRODUCTS[mock_product]["mig_profiles"] if profile["name"] == name), None)


def test_the_table_of_every_product_and_profile():
    lines = ["%-50s %-16s %3s  %-22s %-6s %9s  %s" % ("product", "profile", "n", "placements", "memory", "mock MiB", "placements from")]
    for product in GEOMETRY["products"]:
        mock = DOCUMENTED_TO_MOCK.get(product["product"])
        for profile in product["profiles"]:
            mock_profile = _mock_profile(mock, profile["name"]) if mock else None
            source = profile["placements_source"]
            lines.append("%-50s %-16s %3d  %-22s %-6s %9s  %s" % (
                product["product"], profile["name"], profile["instances"], _placements(profile["placements"]), profile["fractions"]["memory"],
                mock_profile["memory_mib"] if mock_profile else "", "observed: " + ", ".join(source) if isinstance(source, list) else source))
    assert len(lines) == 1 + len(ROWS)
    warnings.warn("NVIDIA's documented MIG geometry, %d products x profiles (n: the documented instances; memory: the documented fraction, "
                  "of which NVML's MiB is not an exact multiple; mock MiB: tables.py's, for its products):\n%s" % (len(ROWS), "\n".join(lines)),
                  stacklevel=1)


def _placements(placements):
    return "{%s}:%d" % (",".join(str(placement[0]) for placement in placements), placements[0][1])


def _row_source(product, profile):
    return "%s: %s" % (profile["source"]["document"], profile["source"]["section"])


def disagreements():
    """(product, profile, field, go-nvml mock value, documented value, source) for every difference, products as tables.py names them."""
    found = []
    for mock_name, name in sorted(MOCK_TO_DOCUMENTED.items()):
        mock, product = tables.PRODUCTS[mock_name], PRODUCTS[name]
        for field, mock_value, value, sources in (("name", mock["name"], product["nvml_name"], product["nvml_name_sources"]),
                                                  ("pci_device_id", mock["pci_device_id"], product["pci_device_id"], product["pci_device_id_sources"]),
                                                  ("memory_mib", mock["memory_mib"], product["memory_mib"], product["memory_mib_sources"])):
            if value is not None and mock_value != value:
                found.append((mock_name, "", field, mock_value, value, ", ".join(sources) or "unconfirmed (see the data file's notes)"))
        mock_profiles = {profile["name"]: profile for profile in mock["mig_profiles"]}
        profiles = {profile["name"]: profile for profile in product["profiles"]}
        for profile_name in sorted(set(mock_profiles) | set(profiles)):
            mock_profile, profile = mock_profiles.get(profile_name), profiles.get(profile_name)
            if mock_profile is None:
                found.append((mock_name, profile_name, "profile", "missing", "documented", _row_source(product, profile)))
                continue
            if profile is None:
                found.append((mock_name, profile_name, "profile", "present", "not documented", "-"))
                continue
            if mock_profile["instances"] != profile["instances"]:
                found.append((mock_name, profile_name, "instances", mock_profile["instances"], profile["instances"], _row_source(product, profile)))
            if sorted(map(tuple, mock_profile["placements"])) != sorted(map(tuple, profile["placements"])):
                source = profile["placements_source"]
                found.append((mock_name, profile_name, "placements", _placements(mock_profile["placements"]), _placements(profile["placements"]),
                              "observed: " + ", ".join(source) if isinstance(source, list) else source))
            for mock_field, field in ENGINES:
                value = profile["engines"][field]
                if value is not None and mock_profile[mock_field] != value:
                    found.append((mock_name, profile_name, field, mock_profile[mock_field], value, _row_source(product, profile)))
    return found


DISAGREEMENTS = disagreements()


def test_the_disagreements_with_the_hardware_tables():
    lines = ["%-17s %-11s %-14s %-28s %-28s %s" % ("product", "profile", "field", "go-nvml mock", "documented", "source")]
    lines += ["%-17s %-11s %-14s %-28s %-28s %s" % row for row in DISAGREEMENTS]
    warnings.warn("tables.py (go-nvml's mock) vs NVIDIA's documented MIG geometry, %d disagreements:\n%s" % (len(DISAGREEMENTS), "\n".join(lines)),
                  stacklevel=1)
    keys = {row[:3] for row in DISAGREEMENTS}
    # Every profile on either side is compared or listed as missing from the other.
    for mock_name, name in MOCK_TO_DOCUMENTED.items():
        mock_names = {profile["name"] for profile in tables.PRODUCTS[mock_name]["mig_profiles"]}
        for profile in PRODUCTS[name]["profiles"]:
            assert profile["name"] in mock_names or (mock_name, profile["name"], "profile") in keys
        for profile_name in mock_names:
            assert profile_name in {profile["name"] for profile in PRODUCTS[name]["profiles"]} or (mock_name, profile_name, "profile") in keys
    # The mock places Hopper and Blackwell GPU instances by compute slices; the hardware by memory slices.
    placements = {(product, profile) for product, profile, field in keys if field == "placements"}
    assert placements == {(product, profile) for product in ("H100-80GB-HBM3", "H200-141GB-HBM3e", "B200-180GB-HBM3e")
                          for profile in {"H100-80GB-HBM3": ("1g.20gb", "3g.40gb", "7g.80gb"), "H200-141GB-HBM3e": ("1g.35gb", "3g.71gb", "7g.141gb"),
                                          "B200-180GB-HBM3e": ("1g.45gb", "3g.90gb", "7g.180gb")}[product]}, sorted(placements)
    h100 = {row[1]: row[3:5] for row in DISAGREEMENTS if row[0] == H100 and row[2] == "placements"}
    assert h100 == {"1g.20gb": ("{0,1,2,3,4,5,6}:1", "{0,2,4,6}:2"), "3g.40gb": ("{0,4}:3", "{0,4}:4"), "7g.80gb": ("{0}:7", "{0}:8")}
    # The device ids go-nvml's mock gives the H200 and the B200 are not theirs (0x2b00 is another GPU's in pci.ids).
    pci = {row[0]: row[3:5] for row in DISAGREEMENTS if row[2] == "pci_device_id"}
    assert pci == {"H200-141GB-HBM3e": ("0x233310de", "0x233510de"), "B200-180GB-HBM3e": ("0x2b0010de", "0x290110de")}


def test_the_issues_example_is_refused():
    assert documented.fits(PRODUCTS[H100], {"1g.20gb": 4, "3g.40gb": 1}) == (False, "needs 12 of 8 memory slices (4 x 1g.20gb at 2 each + 3g.40gb at 4)")
    assert documented.fits(PRODUCTS["A100-SXM4-80GB"], {"1g.20gb": 4, "3g.40gb": 1}) == (
        False, "needs 12 of 8 memory slices (4 x 1g.20gb at 2 each + 3g.40gb at 4)")
    assert documented.fits(PRODUCTS[H100], {"1g.20gb": 2, "3g.40gb": 1}) == (True, "3g.40gb at 0, 1g.20gb at 4/6")
    assert documented.fits(PRODUCTS[H100], {"4g.40gb": 1, "3g.40gb": 1})[0]


def test_the_search_names_the_other_causes():
    assert documented.fits(PRODUCTS[H100], {"1g.10gb+me": 1, "1g.10gb": 6})[0]
    assert documented.fits(PRODUCTS[H100], {"1g.10gb+me": 2}) == (
        False, "2 media-extended instances (2 x 1g.10gb+me), while a GPU has one media extension")
    assert documented.fits(PRODUCTS["RTX-PRO-6000-Blackwell-Server-Edition"], {"1g.24gb+me": 1, "2g.48gb+me.all": 1})[1].startswith(
        "2 media-extended instances (1g.24gb+me + 2g.48gb+me.all)")
    assert documented.fits(PRODUCTS[H100], {"4g.40gb": 1, "2g.20gb": 2}) == (
        False, "needs 8 of 7 compute slices (2 x 2g.20gb at 2 each + 4g.40gb at 4)")
    assert documented.fits(PRODUCTS[H100], {"5g.50gb": 1}) == (
        False, "H100-80GB-HBM3 has no profile 5g.50gb (its profiles: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)")
    # Enough memory and compute slices, but the placements do not combine. No documented layout of up to 7 instances
    # is refused so (the geometry is aligned): this product is changed, its 2g.20gb placed only at 2, inside 4g.40gb's.
    product = copy.deepcopy(PRODUCTS[H100])
    next(profile for profile in product["profiles"] if profile["name"] == "2g.20gb")["placements"] = [[2, 2]]
    assert documented.fits(product, {"2g.20gb": 1, "4g.40gb": 1}) == (
        False, "needs 6 of 8 memory slices, but no combination of the documented placements holds them (2g.20gb at {2}:2; 4g.40gb at {0}:4)")


def mock_allows(mock_product, layout):
    """What the mock's table allows: tables.py's placements, none overlapping, each profile at most its instances.

    A local helper for this comparison (not nvml_state): tables.py's placements of the Hopper and Blackwell GPUs are
    go-nvml's, made by compute slices."""
    profiles = {profile["name"]: profile for profile in tables.PRODUCTS[mock_product]["mig_profiles"]}
    if any(count > profiles[name]["instances"] for name, count in layout.items()):
        return False
    instances = [name for name, count in sorted(layout.items()) for index in range(count)]

    def place(position, used):
        if position == len(instances):
            return True
        for start, size in profiles[instances[position]]["placements"]:
            mask = ((1 << size) - 1) << start
            if not used & mask and place(position + 1, used | mask):
                return True
        return False
    return place(0, 0)


MOCK_ONLY = [
    ("H100-80GB-HBM3", {"1g.20gb": 4, "3g.40gb": 1}, "needs 12 of 8 memory slices (4 x 1g.20gb at 2 each + 3g.40gb at 4)"),
    ("H100-80GB-HBM3", {"1g.20gb": 1, "3g.40gb": 2}, "needs 10 of 8 memory slices (1g.20gb at 2 + 2 x 3g.40gb at 4 each)"),
    ("H200-141GB-HBM3e", {"1g.35gb": 3, "4g.71gb": 1}, "needs 10 of 8 memory slices (3 x 1g.35gb at 2 each + 4g.71gb at 4)"),
    ("H200-141GB-HBM3e", {"1g.35gb": 2, "2g.35gb": 1, "3g.71gb": 1},
     "needs 10 of 8 memory slices (2 x 1g.35gb at 2 each + 2g.35gb at 2 + 3g.71gb at 4)"),
    ("B200-180GB-HBM3e", {"1g.45gb": 4, "2g.45gb": 1}, "needs 10 of 8 memory slices (4 x 1g.45gb at 2 each + 2g.45gb at 2)"),
    ("B200-180GB-HBM3e", {"1g.23gb": 2, "1g.45gb": 2, "3g.90gb": 1},
     "needs 10 of 8 memory slices (2 x 1g.23gb at 1 each + 2 x 1g.45gb at 2 each + 3g.90gb at 4)"),
]


@pytest.mark.parametrize("mock_product, layout, reason", MOCK_ONLY, ids=["%s:%s" % (case[0], "+".join("%dx%s" % (c, n) for n, c in case[1].items()))
                                                                         for case in MOCK_ONLY])
def test_a_layout_the_mock_allows_and_the_documents_refuse(mock_product, layout, reason):
    assert mock_allows(mock_product, layout)
    assert documented.fits(PRODUCTS[MOCK_TO_DOCUMENTED[mock_product]], layout) == (False, reason)


def test_the_mock_and_the_documents_agree_on_the_a100():
    """The A100-SXM4-40GB's placements are the guide's own example: every layout of up to 7 instances is judged alike."""
    product = PRODUCTS["A100-SXM4-40GB"]
    names = [profile["name"] for profile in product["profiles"] if "+me" not in profile["name"]]
    compared = 0
    for counts in itertools.product(range(8), repeat=len(names)):
        if 0 < sum(counts) <= 7:
            layout = {name: count for name, count in zip(names, counts) if count}
            assert mock_allows("A100-SXM4-40GB", layout) == documented.fits(product, layout)[0], layout
            compared += 1
    assert compared > 1000


@pytest.mark.parametrize("mock_product", ["H100-80GB-HBM3", "H200-141GB-HBM3e", "B200-180GB-HBM3e"])
def test_the_mock_allows_more_than_the_documents_on_hopper_and_blackwell(mock_product):
    product = PRODUCTS[MOCK_TO_DOCUMENTED[mock_product]]
    names = [profile["name"] for profile in product["profiles"] if "+me" not in profile["name"]]
    mock_only, documented_only = [], []
    for counts in itertools.product(range(8), repeat=len(names)):
        if 0 < sum(counts) <= 7:
            layout = {name: count for name, count in zip(names, counts) if count}
            mock, fit = mock_allows(mock_product, layout), documented.fits(product, layout)[0]
            if mock and not fit:
                mock_only.append(layout)
            elif fit and not mock:
                documented_only.append(layout)
    # The mock's 3g and 7g are 3 and 7 slices wide where the hardware's are 4 and 8: nothing the documents allow is refused by it.
    assert not documented_only, documented_only
    assert len(mock_only) >= 3, mock_only
