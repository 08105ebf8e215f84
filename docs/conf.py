"""
Sphinx configuration of the HTML site: ``make docs`` (``sphinx-build -W -c docs . docs/_build/html``).

The source directory is the repository root, so that the links of the Markdown pages (``docs/*.md``, ``README.md``)
to the results pages (``benchmarks/**/*.md``) and the changelog resolve to pages of the site, and links to source
files (``sb3_pcl/...py``, ``hyperparams/*.yml``, ...) to copies of them (MyST's download links). Only the files of
``include_patterns`` are read. The API reference (``docs/api``) comes from the docstrings (autodoc).
"""

import inspect
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

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax 3 copied into the site: the equations render offline too
    "sphinx_copybutton",
    "sphinx_rtd_theme",
]
root_doc = "docs/index"
include_patterns = ["README.md", "RESULTS.md", "CHANGELOG.md", "docs/**", "benchmarks/*.md", "benchmarks/**/*.md"]
exclude_patterns = ["docs/_build/**", "**/.*"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}

# Markdown: GitHub-style heading anchors (the pages link to #headings), plain-text code fence languages
myst_heading_anchors = 4
# $...$ and $$...$$ are equations (MathJax), as on GitHub's view of the same pages
myst_enable_extensions = ["colon_fence", "dollarmath", "amsmath"]
suppress_warnings = ["myst.header"]  # some results pages start at a level-3 heading

# API pages: the signature's type hints in the parameter descriptions, members in source order
autodoc_typehints = "description"
autodoc_member_order = "bysource"
autodoc_default_options = {"show-inheritance": True}
# sb3_pcl.zoo wraps rl-zoo3 (the zoo extra): the docs extra alone documents it without installing rl-zoo3
autodoc_mock_imports = ["rl_zoo3", "optuna", "huggingface_hub", "huggingface_sb3"]
napoleon_google_docstring = False
napoleon_numpy_docstring = False

html_theme = "sphinx_rtd_theme"  # as Stable-Baselines3's and sb3-contrib's sites
html_title = f"sb3_pcl {release}"
# one sidebar entry per page: the guide, the API reference and the project pages (the results pages, in a hidden
# toctree, are reached from the pages that cite them)
html_theme_options = {"collapse_navigation": True, "navigation_depth": 3, "includehidden": False}
# the prompts and outputs of console blocks are not copied
copybutton_prompt_text = r"\$ |>>> "
copybutton_prompt_is_regexp = True


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


#: the names the API pages document: ``autoclass`` targets and ``:members:`` lists of docs/api/*.rst
DOCUMENTED = {word for page in (ROOT / "docs" / "api").glob("*.rst") for word in re.findall(r"\w+", page.read_text())}


def is_internal(cls: type) -> bool:
    """:return: whether ``cls`` is one of sb3_pcl's building blocks that no API page documents (a mixin)"""
    return cls.__module__.startswith("sb3_pcl") and cls.__name__ not in DOCUMENTED


def public_bases(app, name: str, obj: type, options, bases: list) -> None:  # Sphinx's event signature
    """
    "Bases:" of the API pages: the classes users know. sb3_pcl's mixins (path collection, replay access, checks)
    give way to the nearest library class they derive from: ``PCL`` shows ``OffPolicyAlgorithm``, ``Reinforce``
    ``BaseAlgorithm``; ``TrustPCL`` keeps ``PCL``.
    """
    shown: list[type] = []
    for base in bases:
        if not isinstance(base, type) or not is_internal(base):
            shown.append(base)
            continue
        ancestor = next((cls for cls in base.__mro__ if not is_internal(cls)), object)
        if ancestor is not object and ancestor not in shown:
            shown.append(ancestor)

    # a class shown next to one of its subclasses adds nothing (PCL's mixins all lead to OffPolicyAlgorithm)
    def covered(base: type) -> bool:
        return any(other is not base and isinstance(other, type) and issubclass(other, base) for other in shown)

    bases[:] = [base for base in shown if not covered(base)] or [object]


#: a ``:param name:`` field of a docstring, with its indented continuation lines
PARAM_FIELD = re.compile(r"^:param (\w+):.*(?:\n(?![ ]*:|\s*$)[ ]+.*)*", flags=re.MULTILINE)


def inherited_parameters(app, what: str, name: str, obj, options, lines: list[str]) -> None:  # Sphinx's event signature
    """
    A class whose docstring leaves some of its constructor's parameters to its base (``TrustPCL`` repeats ``PCL``'s
    signature, ``UREX`` ``Reinforce``'s, and documents only what differs) or documents no parameter itself
    (``RecurrentPCL``, whose constructor is ``PCL``'s) gets its bases' parameters on its page, each marked with the
    class it comes from.
    """
    text = "\n".join(lines)
    if what != "class" or not isinstance(obj, type):
        return
    own = {match[1] for match in PARAM_FIELD.finditer(text)}
    try:
        wanted = set(inspect.signature(obj.__init__).parameters) - {"self", "args", "kwargs"}
    except (TypeError, ValueError):
        wanted = set()
    if ":param" in text and ":param kwargs:" not in text and wanted <= own:
        return
    added: list[str] = []
    for base in obj.__mro__[1:]:
        if not base.__module__.startswith("sb3_pcl") or is_internal(base) or not base.__doc__:
            continue
        source = f":class:`~{base.__module__}.{base.__qualname__}`"
        for match in PARAM_FIELD.finditer(inspect.cleandoc(base.__doc__)):
            if match[1] not in own and match[1] != "kwargs":
                added.extend(match[0].replace(f":param {match[1]}:", f":param {match[1]}: (from {source})", 1).splitlines())
                own.add(match[1])
    at = next((i for i, line in enumerate(lines) if line.startswith(":param kwargs:")), len(lines))
    if at == len(lines) and lines and lines[-1].strip():
        added.insert(0, "")
    lines[at:at] = added


def write_root_redirect(app, exception) -> None:  # Sphinx's event signature
    """Write ``index.html`` at the root of the site: the pages live under ``docs/``, as in the repository."""
    if exception is None and app.builder.format == "html":
        target = "docs/index.html"
        page = f'<!DOCTYPE html><meta charset="utf-8"><meta http-equiv="refresh" content="0; url={target}">'
        page += f'<title>sb3_pcl</title><a href="{target}">sb3_pcl documentation</a>\n'
        (Path(app.outdir) / "index.html").write_text(page, encoding="utf-8")


def setup(app) -> None:
    app.connect("source-read", unlink_folders)
    app.connect("autodoc-process-bases", public_bases)
    app.connect("autodoc-process-docstring", inherited_parameters)
    app.connect("build-finished", write_root_redirect)
