"""
Sphinx configuration of the HTML site: ``make docs`` (``sphinx-build -W -c docs . docs/_build/html``).

The source directory is the repository root, so that the links of the Markdown pages (``docs/*.md``, ``README.md``)
to the results pages (``benchmarks/**/*.md``) and the changelog resolve to pages of the site, and links to source
files (``sb3_pcl/...py``, ``hyperparams/*.yml``, ...) to copies of them (MyST's download links). Only the files of
``include_patterns`` are read. The API reference (``docs/api``) comes from the docstrings (autodoc).
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's sb3_pcl, also without an installed copy

import sb3_pcl  # noqa: E402

project = "sb3_pcl"
author = "sb3_pcl developers"
copyright = "sb3_pcl developers, MIT License"
version = release = sb3_pcl.__version__

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode"]
root_doc = "docs/index"
include_patterns = ["README.md", "CHANGELOG.md", "docs/**", "benchmarks/*.md", "benchmarks/**/*.md"]
exclude_patterns = ["docs/_build/**", "**/.*"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}

# Markdown: GitHub-style heading anchors (the pages link to #headings), plain-text code fence languages
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence"]
suppress_warnings = ["myst.header"]  # some results pages start at a level-3 heading

# API pages: the signature's type hints in the parameter descriptions, members in source order
autodoc_typehints = "description"
autodoc_member_order = "bysource"
autodoc_default_options = {"show-inheritance": True}
napoleon_google_docstring = False
napoleon_numpy_docstring = False

html_theme = "alabaster"
html_title = f"sb3_pcl {release}"
html_theme_options = {"description": "Path-consistency learning for Stable-Baselines3", "fixed_sidebar": True}


#: a Markdown link: its label and its target
MARKDOWN_LINK = re.compile(r"\[(?P<label>[^\]]*)\]\((?P<target>[^)\s#]+)\)")


def unlink_folders(app, docname: str, source: list[str]) -> None:  # Sphinx's event signature
    """
    Turn links to folders of the repository (``[examples/](examples)``) into their label: the site has a page for
    each Markdown file, none for a folder (on the repository's web view the links still open the folder).
    """
    folder = (ROOT / docname).parent

    def replace(match: re.Match) -> str:
        target = match["target"]
        if "://" in target or not (folder / target).is_dir():
            return match[0]
        return match["label"]

    source[0] = MARKDOWN_LINK.sub(replace, source[0])


def write_root_redirect(app, exception) -> None:  # Sphinx's event signature
    """Write ``index.html`` at the root of the site: the pages live under ``docs/``, as in the repository."""
    if exception is None and app.builder.format == "html":
        target = "docs/index.html"
        page = f'<!DOCTYPE html><meta charset="utf-8"><meta http-equiv="refresh" content="0; url={target}">'
        page += f'<title>sb3_pcl</title><a href="{target}">sb3_pcl documentation</a>\n'
        (Path(app.outdir) / "index.html").write_text(page, encoding="utf-8")


def setup(app) -> None:
    app.connect("source-read", unlink_folders)
    app.connect("build-finished", write_root_redirect)
