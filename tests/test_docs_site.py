"""
The HTML site that ``make docs`` builds (``docs/_build/html``), opened in headless Chromium.

Chromium renders the index and an API page (``--dump-dom``: the document after its scripts ran); every internal link
of the rendered pages must lead to a page of the site, and its ``#fragment`` to an element of that page. Skipped when
Chromium or the built site is missing, unless ``SB3_PCL_DOCS_SITE=required`` (CI installs Chromium, builds the site,
then runs this file with it).
"""

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

SITE = Path(__file__).resolve().parents[1] / "docs" / "_build" / "html"
CHROMIUM = next((path for name in ("chromium", "chromium-browser") if (path := shutil.which(name))), None)

#: CI sets SB3_PCL_DOCS_SITE=required after building the site: a missing browser or site then fails instead of skipping
REQUIRED = os.environ.get("SB3_PCL_DOCS_SITE") == "required"
pytestmark = [
    pytest.mark.skipif(not REQUIRED and CHROMIUM is None, reason="needs Chromium (apt-get install chromium)"),
    pytest.mark.skipif(
        not REQUIRED and not (SITE / "docs" / "index.html").is_file(), reason="needs the built site: make docs"
    ),
]


class Anchors(HTMLParser):
    """The link targets (``href`` of ``a``) and the element ids of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(values["id"])  # type: ignore[arg-type]
        if tag == "a" and values.get("name"):
            self.ids.add(values["name"])  # type: ignore[arg-type]
        if tag == "a" and values.get("href"):
            self.links.append(values["href"])  # type: ignore[arg-type]


def parse(html: str) -> Anchors:
    """:return: the links and ids of ``html``"""
    anchors = Anchors()
    anchors.feed(html)
    return anchors


def render(page: Path, profile: Path) -> str:
    """
    :param page: an HTML file of the site
    :param profile: a fresh Chromium user-data folder
    :return: the page's DOM after Chromium loaded it and ran its scripts
    """
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
    flags += ["--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}"]
    assert CHROMIUM is not None, "Chromium is not installed (apt-get install chromium)"
    result = subprocess.run(
        [CHROMIUM, *flags, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "HOME": str(profile)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.lstrip().startswith("<"), f"Chromium rendered nothing for {page}: {result.stderr[-2000:]}"
    return result.stdout


def broken_internal_links(page: Path, dom: str) -> list[str]:
    """:return: the internal links of the rendered ``page`` whose file or ``#fragment`` does not exist"""
    broken, parsed_pages = [], {}
    for href in parse(dom).links:
        parts = urlsplit(href)
        if parts.scheme or parts.netloc or href.startswith("mailto:"):
            continue  # external
        target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
        if SITE.resolve() not in target.parents or not target.is_file():
            broken.append(f"{href} (no file {target})")
            continue
        if parts.fragment and target.suffix == ".html":
            if target not in parsed_pages:
                parsed_pages[target] = parse(target.read_text(encoding="utf-8")).ids
            if unquote(parts.fragment) not in parsed_pages[target]:
                broken.append(f"{href} (no element #{parts.fragment} in {target.name})")
    return broken


@pytest.mark.parametrize(
    ("page", "expected", "ids"),
    [
        ("docs/index.html", ["Path-consistency learning", "API reference", "Exporting models"], set()),
        # the class and its methods, with the parameters from the docstring
        ("docs/api/pcl.html", ["Parameters", "n_steps", "learning_rate"], {"sb3_pcl.PCL", "sb3_pcl.PCL.add_demonstrations"}),
    ],
)
def test_pages_render_with_working_internal_links(page, expected, ids, tmp_path):
    dom = render(SITE / page, tmp_path / "profile")
    text = " ".join(dom.split())
    missing = [word for word in expected if word not in text] + sorted(ids - parse(dom).ids)
    assert not missing, f"{page} rendered without {missing}"
    links = [href for href in parse(dom).links if not urlsplit(href).scheme]
    assert len(links) >= 10, f"{page} has only {len(links)} internal links"
    assert not broken_internal_links(SITE / page, dom)


def test_the_site_root_leads_to_the_index(tmp_path):
    root = SITE / "index.html"
    assert 'url=docs/index.html"' in root.read_text()
    assert not broken_internal_links(root, root.read_text())
    assert "Path-consistency learning" in render(SITE / "docs" / "index.html", tmp_path / "profile")


class Structure(HTMLParser):
    """What the checks below read in a rendered page: documented objects, equations and the sidebar's links."""

    def __init__(self) -> None:
        super().__init__()
        self.objects: list[str] = []  # ids of the documented objects (``dt`` of autodoc)
        self.descriptions: dict[str, int] = {}  # characters of text in each object's description (its ``dd``)
        self.math, self.rendered_math, self.math_errors = 0, 0, 0
        self.sidebar: list[str] = []
        self._current: str | None = None
        self._in_dd = 0
        self._in_math = False
        self._in_sidebar = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        classes = (values.get("class") or "").split()
        if tag == "dt" and "sig-object" in classes and (values.get("id") or "").startswith("sb3_pcl"):
            self._current = values["id"]
            self.objects.append(self._current)  # type: ignore[arg-type]
            self.descriptions[self._current] = 0  # type: ignore[index]
        elif tag == "dd" and (self._current is not None or self._in_dd):
            self._in_dd += 1
        if "math" in classes and tag in ("span", "div"):
            self.math += 1
            self._in_math = True
        if tag == "mjx-container" and self._in_math:
            self.rendered_math += 1
            self._in_math = False
        if tag == "mjx-merror":
            self.math_errors += 1
        if tag == "div" and "wy-menu" in classes:
            self._in_sidebar = 1
        elif tag == "div" and self._in_sidebar:
            self._in_sidebar += 1
        if tag == "a" and self._in_sidebar and values.get("href"):
            self.sidebar.append(values["href"])  # type: ignore[arg-type]

    def handle_endtag(self, tag: str) -> None:
        if tag == "dd" and self._in_dd:
            self._in_dd -= 1
            if not self._in_dd:
                self._current = None
        if tag == "div" and self._in_sidebar:
            self._in_sidebar -= 1

    def handle_data(self, data: str) -> None:
        if self._in_dd and self._current is not None:
            self.descriptions[self._current] += len(data.strip())


def structure(dom: str) -> Structure:
    """:return: the documented objects, equations and sidebar links of a rendered page"""
    parsed = Structure()
    parsed.feed(dom)
    return parsed


API_PAGES = sorted(path.stem for path in (Path(__file__).resolve().parents[1] / "docs" / "api").glob("*.rst"))


@pytest.mark.parametrize("name", API_PAGES)
def test_no_api_page_is_empty(name, tmp_path):
    page = structure(render(SITE / "docs" / "api" / f"{name}.html", tmp_path / "profile"))
    assert page.objects, f"api/{name}.html documents no object (did autodoc fail to import a module?)"
    undocumented = [obj for obj in page.objects if page.descriptions[obj] < 20]
    assert not undocumented, f"api/{name}.html: objects without a description {undocumented}"


def test_api_pages_show_the_sb3_base_classes_and_the_inherited_parameters(tmp_path):
    pcl = " ".join(render(SITE / "docs" / "api" / "pcl.html", tmp_path / "p1").split())
    assert "Bases: OffPolicyAlgorithm" in " ".join(re.sub(r"<[^>]+>", "", pcl).split())
    trust = " ".join(re.sub(r"<[^>]+>", "", render(SITE / "docs" / "api" / "trust_pcl.html", tmp_path / "p2")).split())
    assert "Bases: PCL" in trust
    # TrustPCL's **kwargs go to PCL: PCL's parameters are on its page too, marked as PCL's
    assert re.search(r"buffer_size( \([^)]*\))? \W \(from PCL\) replay capacity", trust), "TrustPCL's page lacks buffer_size"


@pytest.mark.parametrize("name", ["pcl", "trust_pcl", "reinforce", "urex"])
def test_equations_render(name, tmp_path):
    page = structure(render(SITE / "docs" / f"{name}.html", tmp_path / "profile"))
    assert page.math >= 4, f"{name}.html has {page.math} equations"
    assert page.rendered_math == page.math and not page.math_errors, (
        f"{name}.html: MathJax rendered {page.rendered_math} of {page.math} equations, {page.math_errors} errors"
    )


def test_the_sidebar_lists_each_page_once(tmp_path):
    page = structure(render(SITE / "docs" / "index.html", tmp_path / "profile"))
    pages = [href for href in page.sidebar if "#" not in href]
    assert {"pcl.html", "api/pcl.html", "../CHANGELOG.html"} <= set(pages), pages
    twice = sorted({href for href in pages if pages.count(href) > 1})
    assert not twice, f"pages listed twice in the sidebar: {twice}"
