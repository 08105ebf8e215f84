"""
The HTML site that ``make docs`` builds (``docs/_build/html``), opened in headless Chromium.

Chromium renders the index and an API page (``--dump-dom``: the document after its scripts ran); every internal link
of the rendered pages must lead to a page of the site, and its ``#fragment`` to an element of that page. Skipped when
Chromium or the built site is missing, unless ``SB3_PCL_DOCS_SITE=required`` (CI installs Chromium, builds the site,
then runs this file with it).
"""

import os
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
