"""
Every code block of README.md and docs/*.md runs as written, with tiny budgets.

- ``python`` blocks run in this process, each in a fresh namespace and a temporary directory, with every
  ``learn`` capped at :data:`MAX_LEARN_STEPS` steps (:func:`tiny_learn_budgets`).
- ``bash`` blocks run their ``python -m ...`` and ``optuna ...`` commands in order, in one temporary directory, with
  the budget options replaced by small numbers (:func:`with_tiny_budgets`): our own entry points (``python -m
  sb3_pcl...``) in this process, as ``runpy`` runs them (importing torch and rl-zoo3 anew for every command would
  triple the time), the others as subprocesses. ``pip`` commands are not run but say what the block needs: a block
  is skipped when an extra it installs is missing here. Any other command fails the test, so that no block escapes
  it. A block that repeats an earlier one word for word is tested once.
- ``yaml`` blocks must parse; ``text`` blocks are not code.

A block says which extras it needs with a ``pip install`` line (a comment in a ``python`` block), and
:func:`test_blocks_declare_the_extras_they_use` checks that it does whenever it uses one (MuJoCo tasks, rl-zoo3, the
benchmark harness, TensorBoard).
"""

import ast
import importlib.util
import os
import re
import runpy
import shlex
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from stable_baselines3.common.base_class import BaseAlgorithm

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: cap on the steps of every ``learn`` call of a python block
MAX_LEARN_STEPS = 1500
#: replacements of the budget options of the commands, per module: option -> value (None: drop the option's values
#: but the first, e.g. ``--seeds 0 1 2`` -> ``--seeds 0``)
TINY_OPTIONS: dict[str, dict[str, str | None]] = {
    "sb3_pcl": {"--steps": "500", "--eval-episodes": "2"},
    "sb3_pcl.zoo.train": {"-n": "300", "--n-timesteps": "300", "--n-trials": "2", "--eval-episodes": "2"},
    "sb3_pcl.zoo.enjoy": {"-n": "50"},
    "sb3_pcl.zoo.record_video": {"-n": "50"},
    "benchmarks.run": {
        "--steps": "600",
        "--eval-freq": "300",
        "--eval-episodes": "1",
        "--workers": "1",
        "--seeds": None,
    },
}
#: options added when a command lacks them (the budget of a command that uses its default)
DEFAULT_OPTIONS: dict[str, dict[str, str]] = {
    "sb3_pcl": {"--steps": "500", "--eval-episodes": "2"},
    "sb3_pcl.zoo.train": {"-n": "300"},
    "sb3_pcl.zoo.enjoy": {"-n": "50"},
    "sb3_pcl.zoo.record_video": {"-n": "50"},
    "benchmarks.run": {"--workers": "1"},
}
#: modules whose presence stands for an extra of pyproject.toml
EXTRA_MODULES = {
    "mujoco": ["mujoco"],
    "zoo": ["rl_zoo3", "optuna"],
    "bench": ["matplotlib", "pandas"],
    "tests": ["pytest"],
    "onnx": ["onnx", "onnxruntime"],
    "classic-control": ["pygame"],
}
#: what a block uses -> what it must declare with ``pip install``
USES = [
    (re.compile(r"\b(HalfCheetah|Hopper|Walker2d|Swimmer|Ant|Humanoid|Reacher|InvertedPendulum)-v\d"), "mujoco"),
    (re.compile(r"rl_zoo3|sb3_pcl\.zoo|NoVel-v1|\boptuna\b"), "zoo"),
    (re.compile(r"benchmarks\.run"), "bench"),
    (re.compile(r"benchmarks\.run"), "zoo"),
    (re.compile(r"tensorboard_log\s*=|\s-tb\s"), "tensorboard"),
]
#: the 0.1.0 argument names (CHANGELOG.md): no block may use them
OLD_ARGUMENTS = re.compile(
    r"\b(tau|critic_weight|value_optimizer|value_learning_rate|value_gradient_steps|value_mix|value_reg_coef|"
    r"policy_optimizer|trust_region_loss|replay_alpha|replay_priority|replay_eviction|expert_paths|demonstrations|"
    r"shared_curriculum)\s*[=:]"
)
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[ \t]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    code: str

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def extract_blocks(page: Path) -> list[Block]:
    """:return: the fenced code blocks of a markdown page (indented fences, as in list items, included)"""
    text = page.read_text()
    blocks = []
    for match in FENCE.finditer(text):
        body = textwrap.dedent(match["body"])
        blocks.append(Block(page, text.count("\n", 0, match.start()) + 1, match["lang"], body))
    return blocks


BLOCKS = [block for page in PAGES for block in extract_blocks(page)]


def blocks_of(*langs: str) -> list[Block]:
    """:return: the blocks of these languages, each text once (the first block of the same code stands for the others)"""
    seen: set[str] = set()
    blocks = []
    for block in BLOCKS:
        if block.lang in langs and block.code not in seen:
            seen.add(block.code)
            blocks.append(block)
    return blocks


def requirements(code: str) -> set[str]:
    """:return: the extras (``mujoco``, ``zoo``, ...) and packages the ``pip install`` commands of a block name"""
    needed = set()
    for match in re.finditer(r"pip install ([^\n#&;]*)", code):
        for word in shlex.split(match[1]):
            extras = re.search(r"\[([\w,\s-]+)\]", word)
            if extras:
                needed.update(extra.strip() for extra in extras[1].split(","))
            elif not word.startswith("-") and word != ".":
                needed.add(re.split(r"[=<>!~\[]", word)[0])
    return needed


def missing_modules(code: str) -> list[str]:
    """:return: the modules a block's requirements stand for that are not installed here"""
    modules = []
    for requirement in sorted(requirements(code)):
        modules += EXTRA_MODULES.get(requirement, [requirement.replace("-", "_")])
    return [module for module in modules if importlib.util.find_spec(module) is None]


def skip_unless_installed(block: Block) -> None:
    missing = missing_modules(block.code)
    if missing:
        pytest.skip(f"{block.name} needs {', '.join(missing)} (not installed)")


def block_param(block: Block) -> object:
    slow = "benchmarks.run" in block.code or "--optimize" in block.code
    return pytest.param(block, id=block.name, marks=[pytest.mark.slow] if slow else [])


# ----------------------------------------------------------------------------------------------
# The pages' shape
# ----------------------------------------------------------------------------------------------


def test_every_block_has_a_language_the_test_knows():
    unknown = [block.name for block in BLOCKS if block.lang not in ("python", "bash", "yaml", "text")]
    assert not unknown, f"code blocks without a tested language (python, bash, yaml, text): {unknown}"


@pytest.mark.repo
def test_pages_stay_short():
    # the README's results table (written by python -m benchmarks.report) takes a row per comparison
    assert len((ROOT / "README.md").read_text().splitlines()) <= 170
    for page in PAGES[1:]:
        assert len(page.read_text().splitlines()) <= 400, page.name


@pytest.mark.repo
def test_readme_has_the_two_setup_commands_and_ci_repeats_the_second():
    setup = (ROOT / "README.md").read_text().split("## Setup", 1)[1].split("\n## ", 1)[0]
    commands = [block.strip() for block in re.findall(r"```bash\n(.*?)```", setup, re.S)]
    assert commands == [
        "pip install torch==2.13.0 && pip install -e . && python -m sb3_pcl --algo pcl --env CartPole-v1",
        'pip install torch==2.13.0 && pip install -e ".[tests]" && python -m pytest -q -n auto',
    ]
    assert commands[1] in (ROOT / ".ci" / "run").read_text().splitlines()


def github_anchor(heading: str) -> str:
    """:return: the anchor GitHub gives a markdown heading"""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {github_anchor(heading) for heading in re.findall(r"^#+ (.*)$", text, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_relative_links_point_to_files_and_headings_that_exist(page):
    text = FENCE.sub("", page.read_text())
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in anchors(linked)):
            broken.append(target)
    assert not broken, f"broken links in {page.name}: {broken}"


@pytest.mark.parametrize("block", BLOCKS, ids=lambda block: block.name)
def test_blocks_use_the_current_argument_names(block):
    old = OLD_ARGUMENTS.findall(block.code)
    assert not old, f"{block.name} uses 0.1.0 argument names {old} (see CHANGELOG.md)"


@pytest.mark.parametrize("block", blocks_of("python", "bash"), ids=lambda block: block.name)
def test_blocks_declare_the_extras_they_use(block):
    declared = requirements(block.code)
    for pattern, extra in USES:
        if pattern.search(block.code):
            assert extra in declared, f"{block.name} uses {extra} but installs only {sorted(declared)}"


def core_modules() -> set[str]:
    """:return: the modules ``pip install -e .`` (README command 1) installs: the core dependencies and sb3_pcl"""
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[\s<>=!~\[;]", dependency)[0].lower() for dependency in dependencies}
    return {"yaml" if name == "pyyaml" else name.replace("-", "_") for name in names} | {"sb3_pcl"}


@pytest.mark.parametrize("block", blocks_of("python"), ids=lambda block: block.name)
def test_python_blocks_import_only_what_they_install(block):
    declared = set()
    for requirement in requirements(block.code):
        declared.update(EXTRA_MODULES.get(requirement, [requirement.replace("-", "_")]))
    imported = set()
    for node in ast.walk(ast.parse(block.code)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    extra = imported - core_modules() - declared - set(sys.stdlib_module_names)
    assert not extra, f"{block.name} imports {sorted(extra)}, which README command 1 does not install: add a pip line"


@pytest.mark.parametrize("block", blocks_of("yaml"), ids=lambda block: block.name)
def test_yaml_blocks_parse(block):
    assert isinstance(yaml.safe_load(block.code), dict)


# ----------------------------------------------------------------------------------------------
# Python blocks
# ----------------------------------------------------------------------------------------------


@pytest.fixture
def tiny_learn_budgets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cap ``total_timesteps`` of every ``learn`` call (every SB3 algorithm passes it through ``_setup_learn``)."""
    setup_learn = BaseAlgorithm._setup_learn

    def capped(self, total_timesteps, *args, **kwargs):
        return setup_learn(self, min(total_timesteps, MAX_LEARN_STEPS), *args, **kwargs)

    monkeypatch.setattr(BaseAlgorithm, "_setup_learn", capped)


@pytest.mark.parametrize("block", [block_param(block) for block in blocks_of("python")])
def test_python_block_runs(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_learn_budgets: None):
    skip_unless_installed(block)
    monkeypatch.chdir(tmp_path)
    exec(compile(block.code, block.name, "exec"), {"__name__": "__main__"})


# ----------------------------------------------------------------------------------------------
# Shell blocks
# ----------------------------------------------------------------------------------------------


def shell_commands(code: str) -> Iterator[list[str]]:
    """:return: the commands of a bash block to run (``pip`` and ``wait`` are skipped), each as an argument list"""
    for line in code.replace("\\\n", " ").splitlines():
        for part in line.split("&&"):
            words = shlex.split(part, comments=True)
            if words and words[-1] == "&":  # run in the background: here, one after the other
                words = words[:-1]
            if not words or words[0] in ("pip", "wait") or words[:3] == ["python", "-m", "pytest"]:
                continue
            assert words[:2] == ["python", "-m"] or words[0] == "optuna", f"no test runs this command: {part.strip()}"
            yield words


def with_tiny_budgets(words: list[str], out_dir: Path) -> list[str]:
    """:return: the command with its budget options made tiny (and a benchmark's ``--out`` folder moved under
    ``out_dir``: the harness refuses to write into a folder holding another invocation's results)"""
    if words[0] == "optuna":
        return words
    module = words[2]
    options = TINY_OPTIONS.get(module, {})
    groups: list[list[str]] = []  # each option with its values
    for word in words[3:]:
        if word.startswith("-") or not groups:
            groups.append([word])
        else:
            groups[-1].append(word)
    result = words[:3]
    for option, *values in groups:
        if module == "benchmarks.run" and option == "--out":
            values = [str(out_dir / values[0])]
        elif option in options and values:
            replacement = options[option]
            values = values[:1] if replacement is None else [replacement]
        result += [option, *values]
    for option, value in DEFAULT_OPTIONS.get(module, {}).items():
        if option not in result and not (option == "-n" and "--n-timesteps" in result):
            result += [option, value]
    return result


def test_tiny_budgets_rewrite_only_the_budget_options(tmp_path):
    command = "python -m benchmarks.run --algos pcl ppo --envs CartPole-v1 --seeds 0 1 2 --steps 100000 --out results/x"
    assert with_tiny_budgets(command.split(), tmp_path) == [
        *shlex.split("python -m benchmarks.run --algos pcl ppo --envs CartPole-v1 --seeds 0 --steps 600 --out"),
        str(tmp_path / "results" / "x"),
        "--workers",
        "1",
    ]
    command = "python -m sb3_pcl.zoo.train --algo pcl --env CartPole-v1 -f logs --seed 0"
    assert with_tiny_budgets(command.split(), tmp_path) == [*command.split(), "-n", "300"]
    command = "python -m sb3_pcl --algo pcl --env CartPole-v1 --steps 1000000 --verbose 1"
    assert with_tiny_budgets(command.split(), tmp_path) == [
        *shlex.split("python -m sb3_pcl --algo pcl --env CartPole-v1 --steps 500 --verbose 1 --eval-episodes 2")
    ]


def run_here(command: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Run ``python -m <module> <args>`` in this process (in the current directory), as ``runpy`` runs it."""
    with monkeypatch.context() as patch:
        patch.setattr(sys, "argv", [command[2], *command[3:]])
        try:
            runpy.run_module(command[2], run_name="__main__", alter_sys=True)
        except SystemExit as exit_:
            assert exit_.code in (None, 0), f"{' '.join(command)} exited with {exit_.code}"


@pytest.mark.parametrize("block", [block_param(block) for block in blocks_of("bash")])
def test_bash_block_runs(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_learn_budgets: None):
    skip_unless_installed(block)
    monkeypatch.chdir(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    for words in shell_commands(block.code):
        command = with_tiny_budgets(words, tmp_path / "benchmark")
        if command[:2] == ["python", "-m"] and command[2].split(".")[0] == "sb3_pcl":
            run_here(command, monkeypatch)
            continue
        cwd = ROOT if command[2:3] == ["benchmarks.run"] else tmp_path
        if command[0] == "python":
            command = [sys.executable, *command[1:]]
        result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, f"{' '.join(command)}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
