"""
Every result number in the prose of README.md and docs/*.md has a source.

A number of a page's prose is sourced when it is written in one of that page's generated blocks (the report's
``<!-- campaign FILE: start -->`` ... ``<!-- campaign FILE: end -->``, README's ``<!-- results summary ... -->`` ...
``<!-- end of the results summary -->``), or when a ``## Numbers in the docs`` table of a ``NOTES.md`` under
``benchmarks/results/`` has a row for it: ``| page | number, as written | source |``, the source saying where in the
committed data the number is (a file and its rows or columns, or the command that computes it from them). A row for
a number that its page no longer writes fails the check (the number changed: check its source again).

Prose is a page without what is not prose: its generated blocks, code (fenced blocks and inline code), math
(``$...$``), HTML comments, headings, link targets and dates. Of the prose, these numbers are not results (:func:`numbers`):

- an exponent (``2**32``);
- part of a name: a number joined to a letter or an underscore (``HalfCheetah-v5``, ``sb3_pcl``, ``1e-3`` written
  ``lr1e-3``, ``arXiv:1707.01891``);
- a version (``Python 3.11``, ``0.3.0``: a word of :data:`VERSIONED` before it, or two dots);
- a year (``2010`` to ``2029`` before ``recipe``, ``)`` or ``-2018``, after a month, a conference or a citation's
  comma);
- a constant in scientific notation (``3.4e38``, ``1e30``: float32's range, an example's magnitude);
- ``95%`` before ``bootstrap``, ``interval`` or ``confidence`` (the level of an interval);
- a count: a whole number from 0 to 10 with no unit (seeds, tasks, runs: ``3 seeds``, ``5 against 5``).

:data:`UNSOURCED` lists the numbers still without a source when this check was written: the check fails on any
other unsourced number, and on a listed one that no longer is (remove its line). ``python checks/test_docs_numbers.py``
rewrites the list from the pages as they are (after a change to the docs that adds or sources numbers on purpose).
"""

import re
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.repo

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: a generated block: its start marker, then anything, then its end marker
GENERATED = re.compile(
    r"<!-- campaign (\S+): start -->.*?<!-- campaign \1: end -->"
    r"|<!-- results summary.*?-->.*?<!-- end of the results summary -->",
    re.DOTALL,
)
#: what is not prose, in the order it is removed
NOT_PROSE = [
    re.compile(r"^[ \t]*```.*?^[ \t]*```", re.DOTALL | re.MULTILINE),  # fenced code
    re.compile(r"<!--.*?-->", re.DOTALL),  # HTML comments
    re.compile(r"``.+?``|`(?:[^`\n]|\n(?![ \t]*\n))+`"),  # inline code (a span may break a line, not a paragraph)
    re.compile(r"\$\$.+?\$\$|\$[^$\n]+\$", re.DOTALL),  # math
    re.compile(r"^#{1,6} .*$", re.MULTILINE),  # headings
    re.compile(r"\]\([^)\s]*\)"),  # link targets
    re.compile(r"https?://\S+"),  # bare addresses
    re.compile(r"\b20\d\d-\d\d-\d\d\b"),  # dates
]
#: words after which a number is a version
VERSIONED = ("Python", "torch", "PyTorch", "SB3", "Stable-Baselines3", "rl-zoo3", "version", "release", "gymnasium")
MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
#: a number as the prose writes it: sign, digits (thousands with ``,`` or ``_``), decimals, exponent, unit suffix
NUMBER = re.compile(
    r"(?<![\w.:])(?<!\d\*\*)(?<![a-jl-z_]-)(?<![A-LN-Z]-)(?:(?<![\d)])-)?\d(?:[\d,_]*\d)?(?:\.\d+)?(?:e[-+]?\d+)?(?:[kM%]|x(?!\w))?(?![\w.]\w)"
)


def prose(text: str) -> str:
    """:return: ``text`` without its generated blocks and without what is not prose (each replaced by a space)"""
    text = GENERATED.sub(" ", text)
    for pattern in NOT_PROSE:
        text = pattern.sub(" ", text)
    return text


def numbers(text: str) -> list[str]:
    """:return: the result numbers of a prose ``text``, as written, less those the module docstring sets aside"""
    found = []
    for match in NUMBER.finditer(text):
        number = match[0]
        before = text[: match.start()].rstrip().removesuffix(">=").rstrip()
        after = text[match.end() :].lstrip()
        if re.fullmatch(r"\d+", number) and int(number) <= 10:
            continue
        if before.endswith(VERSIONED) or re.match(r"\.\d", text[match.end() :]) or "e" in number:
            continue
        if re.fullmatch(r"20[12]\d", number) and (
            re.match(r" ?recipe|-20[12]\d|\)", after if after.startswith("recipe") else text[match.end() :])
            or re.search(rf"({MONTHS}|ICLR|NeurIPS|ICML)[- ]?$|, $", text[: match.start()])
        ):
            continue
        if number == "95%" and re.match(r"(stratified )?(bootstrap|interval|confidence)", after):
            continue
        found.append(number)
    return found


def generated_text(text: str) -> str:
    """:return: the generated blocks of a page, joined"""
    return "\n".join(match[0] for match in GENERATED.finditer(text))


def sourced_in_notes() -> set[tuple[str, str]]:
    """:return: (page, number) of every row of the ``## Numbers in the docs`` tables of the results' NOTES.md"""
    rows = set()
    for notes in sorted((ROOT / "benchmarks" / "results").rglob("NOTES.md")):
        section = re.search(r"^## Numbers in the docs\n(.*?)(?=^## |\Z)", notes.read_text(), re.DOTALL | re.MULTILINE)
        for line in section[1].splitlines() if section else []:
            cells = [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
            if len(cells) == 3 and cells[0] not in ("Page", "") and not set(cells[0]) <= set("-"):
                assert cells[2], f"{notes}: {line}: the row names no source"
                rows.add((cells[0], cells[1]))
    return rows


def unsourced() -> list[tuple[str, str]]:
    """:return: (page, number) of every prose number of the pages with no source, in page order"""
    notes = sourced_in_notes()
    missing = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        name = page.relative_to(ROOT).as_posix()
        blocks = set(NUMBER.findall(generated_text(text)))
        for number in numbers(prose(text)):
            if number not in blocks and (name, number) not in notes and (name, number) not in missing:
                missing.append((name, number))
    return missing


#: the file of the numbers without a source when this check was written: one ``page<TAB>number<TAB>note`` a line, the
#: note saying where else the number is written (a lead to its source, not one)
UNSOURCED_FILE = Path(__file__).with_name("docs_numbers_unsourced.txt")
UNSOURCED = [tuple(line.split("\t")[:2]) for line in UNSOURCED_FILE.read_text().splitlines() if line.strip()]


def test_the_rules_set_aside_names_versions_years_and_counts() -> None:
    text = "HalfCheetah-v5 on 3 seeds at 1M steps: 6432 [6030, 7024], -88.2, p = 0.44 (Python 3.11, the 2017 recipe)"
    assert numbers(prose(text)) == ["1M", "6432", "6030", "7024", "-88.2", "0.44"]
    assert numbers(prose("seeds 0-2 and 100-102, `lr=3e-3`, $\\gamma = 0.99$, ICLR 2018, 2026-11-27")) == ["100", "102"]
    assert numbers(prose("rewards of 1e30 overflow float32 (3.4e38), seeds up to 2**32 - 1")) == []
    assert numbers(prose("`--steps 300000\n--block 25000` ran")) == []
    assert numbers(prose("0.82M-1.94M and 77k-347k steps")) == ["0.82M", "1.94M", "77k", "347k"]
    assert numbers(prose("(Nachum, 2017-2018) at 95% bootstrap intervals, on Python >= 3.11\n```\n1234\n```")) == []


def test_every_number_of_the_docs_prose_has_a_source() -> None:
    missing = unsourced()
    new = [f"{page}\t{number}" for page, number in missing if (page, number) not in UNSOURCED]
    stale = [f"{page}\t{number}" for page, number in UNSOURCED if (page, number) not in missing]
    assert not new, (
        "numbers of the docs' prose with no source: put each in a generated block, or give it a row of a"
        " '## Numbers in the docs' table in the NOTES.md of its results folder (or, for a number that is not a"
        " result, list it: python checks/test_docs_numbers.py):\n" + "\n".join(new)
    )
    assert not stale, (
        f"sourced or gone now: remove these lines from {UNSOURCED_FILE.name} (python checks/test_docs_numbers.py):\n"
        + "\n".join(stale)
    )


def test_every_source_row_names_a_number_of_its_page() -> None:
    prose_numbers = {}
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        prose_numbers[page.relative_to(ROOT).as_posix()] = set(numbers(prose(text)))
    stale = sorted(row for row in sourced_in_notes() if row[1] not in prose_numbers.get(row[0], set()))
    assert not stale, f"'## Numbers in the docs' rows of numbers their page no longer writes: {stale}"


def where_else(number: str) -> str:
    """:return: a note of the committed results and hyperparameter files that write ``number`` (a lead to a source)"""
    written = re.compile(r"(?<![\w.])" + re.escape(number) + r"(?![\w]|\.\d)")
    results = [*sorted((ROOT / "benchmarks" / "results").rglob("*.md")), ROOT / "RESULTS.md"]
    hits = [path for path in results if written.search(path.read_text(encoding="utf-8"))]
    if hits:
        return f"written in {len(hits)} results file(s), e.g. {hits[0].relative_to(ROOT).as_posix()}"
    files = sorted([*(ROOT / "hyperparams").glob("*.yml"), *(ROOT / "benchmarks").glob("*/*.yml")])
    hits = [path for path in files if written.search(path.read_text(encoding="utf-8"))]
    if hits:
        return "written only in " + ", ".join(path.relative_to(ROOT).as_posix() for path in hits[:2])
    return "written in no committed results or hyperparameter file"


def write_unsourced() -> None:
    """Rewrite :data:`UNSOURCED_FILE` with the pages' unsourced numbers, keeping the notes of those already listed."""
    notes = {}
    for line in UNSOURCED_FILE.read_text().splitlines():
        page, number, *note = line.split("\t")
        notes[(page, number)] = note[0] if note else where_else(number)
    missing = unsourced()
    lines = [f"{page}\t{number}\t{notes.get((page, number)) or where_else(number)}" for page, number in missing]
    UNSOURCED_FILE.write_text("".join(line + "\n" for line in lines))
    print(f"{UNSOURCED_FILE}: {len(missing)} numbers without a source", file=sys.stderr)


if __name__ == "__main__":
    write_unsourced()
