"""The apps are layered, so that no two of them import each other.

From the bottom up:
    core                                   pure computation: imports no app
    common, demo < audit < accounts        helpers and sample data, the audit trail, teams
    datasets < releases < jobs             a release is made of a dataset; a job runs the
                                           work that makes profiles and releases
    api, cli, dashboard                    interfaces over all of the above (the dashboard: the
                                           home page, the audit trail and the dataset pages that
                                           read jobs and releases)

A module may import its own app and any app below it, never one above: an app's pages (views,
URLs, forms, admin) included. A page that reads or starts the work of a higher app belongs to
that app or to the dashboard, and ``anonweb/urls.py`` serves it at its address (the dataset
page, in the dashboard, under ``datasets:``). The entry points of an app (its Celery tasks,
management commands, app config and signals: ``ENTRY_MODULES``) are the one exception: like the
command line, they start use cases of any app (``purge_expired`` purges through the jobs app). No
module imports another app's interface modules (pages or entry points), and nothing imports the
interface apps.

Every ``import`` is checked, those inside functions too: an import moved into a function to
dodge a cycle is still a dependency. And since there is no cycle left to dodge, an app imports
other apps at the top of its modules, never inside a function. Circles between the modules of one app (or of the
core) are refused by tests/architecture/test_import_graph.py, which checks the whole package file by file."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "anonweb"

# rank of each app; an app may import the apps of a lower or equal rank
LAYERS: dict[str, int] = {
    "core": 0,
    "common": 1,
    "audit": 2,
    "accounts": 3,
    "datasets": 4,
    "releases": 5,
    "jobs": 6,
    "demo": 1,
    "api": 7,
    "cli": 7,
    "dashboard": 7,
}
# project modules: settings and the worker's app sit below the apps (the Celery tasks use
# `anonweb.celery.app`), the root URLconf and the WSGI entry above them
PROJECT_LOW = {"env", "settings", "test_settings", "celery"}
PROJECT_TOP = {"urls", "wsgi"}
# the interface apps: nothing imports them
INTERFACE_APPS = {"api", "cli", "dashboard"}
# modules of an app (by their path inside the app) that are its pages: they sit in its layer
PAGE_MODULES = {"views", "plan_views", "urls", "forms", "admin", "context_processors"}
# modules of an app that are its entry points (with its management commands): they may start
# use cases of any app
ENTRY_MODULES = {"apps", "tasks", "signals"}
INTERFACE_MODULES = PAGE_MODULES | ENTRY_MODULES


def _is_interface(parts: tuple[str, ...]) -> bool:
    """parts: a module's dotted name inside its app, e.g. ("views",) or
    ("management", "commands", "bootstrap_demo")."""
    return bool(parts) and (parts[0] == "management" or any(p in INTERFACE_MODULES for p in parts))


def _is_entry_point(parts: tuple[str, ...]) -> bool:
    return bool(parts) and (parts[0] == "management" or any(p in ENTRY_MODULES for p in parts))


def _module_name(path: Path, base: Path) -> tuple[str, ...]:
    parts = path.relative_to(base).with_suffix("").parts
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imports(tree: ast.AST, module: tuple[str, ...], is_package: bool):
    """Every module an import statement names, with its line; relative imports resolved."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, tuple(alias.name.split("."))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module if is_package else module[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = base + (tuple(node.module.split(".")) if node.module else ())
            else:
                target = tuple((node.module or "").split("."))
            if target[:1] == ("anonweb",) and len(target) <= 2:
                # `from anonweb import datasets`, `from anonweb.jobs import views`: modules
                for alias in node.names:
                    yield node.lineno, (*target, alias.name)
            else:
                yield node.lineno, target


def _problem(source: tuple[str, ...], target: tuple[str, ...]) -> str | None:
    """Why `source` (a module under anonweb) may not import `target`, or None."""
    if target[:1] != ("anonweb",) or len(target) < 2:
        return None
    src_app, dst_app = source[1], target[1]
    if src_app == dst_app:
        return None
    if dst_app in PROJECT_LOW:
        return "core imports no project module" if src_app == "core" else None
    if dst_app in PROJECT_TOP:
        return "the root URLconf and WSGI entry are imported by nothing"
    if src_app in PROJECT_LOW | PROJECT_TOP:
        return None
    if dst_app not in LAYERS:
        return f"anonweb.{dst_app} is not in the layering of tests/architecture/test_app_layers.py"
    if src_app not in LAYERS:
        return f"anonweb.{src_app} is not in the layering of tests/architecture/test_app_layers.py"
    if dst_app in INTERFACE_APPS:
        return f"{dst_app} is an interface: nothing imports it"
    if _is_interface(target[2:]):
        return f"{'.'.join(target)} is an interface of {dst_app}"
    if LAYERS[dst_app] > LAYERS[src_app] and not (
        _is_entry_point(source[2:]) and src_app != "core"
    ):
        return f"{src_app} (layer {LAYERS[src_app]}) sits below {dst_app} ({LAYERS[dst_app]})"
    return None


def layer_violations(package: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        module = _module_name(path, package.parent)
        if len(module) < 2:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, target in _imports(tree, module, path.name == "__init__.py"):
            why = _problem(module, target)
            if why:
                where = path.relative_to(package.parent)
                found.append(f"{where}:{line}: imports {'.'.join(target)}: {why}")
    return found


def _imports_in_functions(tree: ast.AST, module: tuple[str, ...], is_package: bool):
    found = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.update(_imports(fn, module, is_package))
    return sorted(found)


def imports_of_other_apps_in_functions(package: Path = PACKAGE) -> list[str]:
    """An app's module importing another app inside a function: the way the cycle used to be
    held together. With the layering there is no cycle to dodge, so such an import belongs at
    the top of the module. The core may still be imported lazily (the commands do, to start
    fast), and an app may import its own modules lazily."""
    found = []
    for path in sorted(package.rglob("*.py")):
        module = _module_name(path, package.parent)
        if len(module) < 2 or module[1] not in LAYERS or module[1] == "core":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, target in _imports_in_functions(tree, module, path.name == "__init__.py"):
            other_app = target[1:2] not in (module[1:2], ("core",), ())
            if target[:1] == ("anonweb",) and other_app:
                where = path.relative_to(package.parent)
                found.append(f"{where}:{line}: imports {'.'.join(target)} in a function")
    return found


def test_no_app_imports_another_inside_a_function():
    offenders = imports_of_other_apps_in_functions()
    assert not offenders, "move these imports to the top of their module:\n" + "\n".join(offenders)


def test_apps_import_only_the_layers_below_them():
    offenders = layer_violations()
    assert not offenders, "imports against the layering:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    ("source", "target", "allowed"),
    [
        ("anonweb.jobs.services", "anonweb.datasets.services", True),
        ("anonweb.releases.budget", "anonweb.datasets.models", True),
        ("anonweb.datasets.services", "anonweb.jobs.services", False),
        ("anonweb.datasets.ingest", "anonweb.jobs.models", False),
        ("anonweb.releases.services", "anonweb.jobs.services", False),
        ("anonweb.audit.selectors", "anonweb.accounts.models", False),
        ("anonweb.core.risk.classes", "anonweb.common.charts", False),
        ("anonweb.core.risk.classes", "anonweb.settings", False),
        # a page of a lower app reading or starting the work of a higher one
        ("anonweb.datasets.views", "anonweb.jobs.services", False),
        ("anonweb.datasets.views", "anonweb.releases.budget", False),
        ("anonweb.datasets.urls", "anonweb.jobs.selectors", False),
        ("anonweb.datasets.forms", "anonweb.releases.models", False),
        ("anonweb.releases.views", "anonweb.jobs.services", False),
        ("anonweb.accounts.admin", "anonweb.datasets.models", False),
        # ...belongs to the higher app, or the dashboard
        ("anonweb.jobs.views", "anonweb.releases.selectors", True),
        ("anonweb.dashboard.dataset_views", "anonweb.jobs.services", True),
        ("anonweb.dashboard.dataset_views", "anonweb.datasets.views", False),
        # entry points start use cases of any app
        ("anonweb.datasets.management.commands.x", "anonweb.jobs.services", True),
        ("anonweb.datasets.tasks", "anonweb.jobs.retention", True),
        ("anonweb.jobs.services", "anonweb.datasets.views", False),
        ("anonweb.jobs.views", "anonweb.datasets.views", False),
        ("anonweb.jobs.services", "anonweb.api.errors", False),
        ("anonweb.api.views", "anonweb.jobs.services", True),
        ("anonweb.common.charts", "anonweb.core.assessment.charts", True),
    ],
)
def test_the_rule(source, target, allowed):
    why = _problem(tuple(source.split(".")), tuple(target.split(".")))
    assert (why is None) is allowed, why


def test_an_import_inside_a_function_is_found(tmp_path):
    """Both checks see imports in functions and methods, relative ones resolved."""
    app = tmp_path / "anonweb" / "datasets"
    app.mkdir(parents=True)
    (app / "services.py").write_text(
        "import anonweb.datasets.models\n\n"
        "def upload():\n    from anonweb.jobs.services import job_create\n\n"
        "class Page:\n    def other(self):\n        from ..releases import budget\n"
    )
    assert layer_violations(tmp_path / "anonweb") == [
        "anonweb/datasets/services.py:4: imports anonweb.jobs.services: "
        "datasets (layer 4) sits below jobs (6)",
        "anonweb/datasets/services.py:8: imports anonweb.releases.budget: "
        "datasets (layer 4) sits below releases (5)",
    ]
    assert imports_of_other_apps_in_functions(tmp_path / "anonweb") == [
        "anonweb/datasets/services.py:4: imports anonweb.jobs.services in a function",
        "anonweb/datasets/services.py:8: imports anonweb.releases.budget in a function",
    ]


# Apps whose pages show nothing of a higher app: every app's views and URLs stay in its layer
# (the home page, the audit trail and the dataset page, which read across apps, are in the
# dashboard; a release page that starts a job is in the jobs app).
SELF_CONTAINED_PAGES = set(LAYERS) - INTERFACE_APPS - {"core"}


def pages_reaching_above(package: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        module = _module_name(path, package.parent)
        if len(module) < 3 or module[1] not in SELF_CONTAINED_PAGES:
            continue
        if module[-1] not in ("views", "urls"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, target in _imports(tree, module, path.name == "__init__.py"):
            if target[:1] == ("anonweb",) and LAYERS.get(target[1], 0) > LAYERS[module[1]]:
                where = path.relative_to(package.parent)
                found.append(f"{where}:{line}: imports {'.'.join(target)}")
    return found


def test_the_home_page_and_the_audit_trail_sit_above_the_apps_they_read():
    offenders = pages_reaching_above()
    assert not offenders, "pages reading a higher app belong in the dashboard:\n" + "\n".join(
        offenders
    )
