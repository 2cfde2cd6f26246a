"""``bisectbot patches``: list, check and apply the patch stack (``patches/stack.yaml``).

``check`` exits 0 when every required patch applies, is upstream or is not applicable,
and 2 when a required patch conflicts (the report is printed first). ``apply`` exits 2
(tree untouched) when a required patch conflicts. ``--json`` (global) prints
:meth:`PatchStatus.to_dict` / :meth:`StackApplication.to_dict`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import click

from ..errors import EXIT_BAD_INPUT, BadInput, BisectbotError
from .base import Ctx, cli, pass_ctx


def _ids(values: tuple[str, ...]) -> list[str] | None:
    out = [i.strip() for v in values for i in v.split(",") if i.strip()]
    return out or None


def _versions(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for v in values:
        pkg, sep, ver = v.partition("=")
        if not sep or not pkg or not ver:
            raise click.BadParameter(f"{v!r}: expected PACKAGE=VERSION, e.g. vllm=0.19.1", param_hint="--version")
        out[pkg.strip()] = ver.strip().lstrip("=")
    return out


def _stack(path: Path | None) -> Any:
    """The stack from ``--stack``, else by the lookup order of :mod:`bisectbot.shipped`."""
    from ..patches import load_stack
    from ..shipped import find_stack

    return load_stack(find_stack(path))


stack_opt = click.option("--stack", "stack_path", type=click.Path(dir_okay=False, path_type=Path),
                         help="stack file (default: $BISECTBOT_PATCHES_DIR/stack.yaml, ./patches/stack.yaml, the shipped stack)")
ids_opt = click.option("--ids", "ids", multiple=True, metavar="ID[,ID...]",
                       help="patch ids in order (repeatable or comma-separated); default: the whole stack")
version_opt = click.option("--version", "versions", multiple=True, metavar="PKG=VERSION",
                           help="package version for variant choice (default: read from the tree's metadata)")


PATCHES_EPILOG = """\b
Examples:
  bisectbot patches list
  bisectbot patches check --pypi vllm==0.19.1 --ids vllm-sparse-mla-workspace
  bisectbot patches check --image rocm/vllm-dev:nightly_main_20260412
  bisectbot patches apply --source /usr/local/lib/python3.12/dist-packages --ids vllm-sparse-mla-workspace
  bisectbot patches list --stack patches/stack.yaml      # another stack (also $BISECTBOT_PATCHES_DIR)
"""


@cli.group(epilog=PATCHES_EPILOG)
def patches() -> None:
    """Patch stacks: which patch applies to a tree, through which variant, or is upstream."""


@patches.command("list")
@stack_opt
@pass_ctx
def list_cmd(ctx: Ctx, stack_path: Path | None) -> None:
    """List the patches of the stack with their variants and conditions."""
    from ..patches import stack_hash

    stack = _stack(stack_path)
    data = {"stack": str(stack.base_dir / "stack.yaml"),
            "stack_hash": stack_hash(stack, None), "patches": []}
    lines = []
    for p in stack.patches:
        vs = [{"id": v.id, "diff": v.diff, "versions": v.versions, "contains": v.contains,
               "not_contains": v.not_contains} for v in p.variants]
        data["patches"].append({"id": p.id, "package": p.package, "path": p.path, "required": p.required,
                                "requires": p.requires, "description": p.description, "variants": vs})
        lines.append(f"{p.id}  ({p.package}/{p.path}, {'required' if p.required else 'best-effort'})")
        if p.description:
            lines.append(f"    {p.description}")
        for v in p.variants:
            cond = ", ".join(f"{k} {val!r}" for k, val in (("versions", v.versions), ("contains", v.contains),
                                                              ("not_contains", v.not_contains)) if val)
            lines.append(f"    variant {v.id}: {v.diff}" + (f"  [{cond}]" if cond else ""))
    lines.append(f"stack hash: {data['stack_hash']}")
    ctx.emit(data, "\n".join(lines))


def _render(statuses: list, header: str) -> str:
    from ..patches import State, conflict_message

    width = max((len(s.id) for s in statuses), default=10)
    out = [header]
    for s in statuses:
        kind = "required" if s.required else "best-effort"
        line = f"  {s.id:<{width}}  {kind:<11}  {s.label}"
        if s.state is State.UPSTREAM and s.detail and not s.patched_here:
            line += f" ({s.detail})"
        out.append(line)
        if s.state is State.CONFLICT:
            out.extend("      " + ln for ln in conflict_message(s).splitlines()[1:])
    return "\n".join(out)


def _image_root(image: str, members: list[str], dest: Path) -> Path:
    try:
        from .. import components  # type: ignore[attr-defined]
    except ImportError:
        raise BisectbotError(
            "patches check --image needs the containers area (bisectbot.components), which is not "
            "available yet; copy the installed packages out of the image and use --source DIR"
        ) from None
    copy = getattr(components, "copy_from_image", None)
    if copy is None:
        raise BisectbotError("bisectbot.components has no copy_from_image(image, paths, dest); "
                             "use --source DIR with the image's site-packages copied out")
    return Path(copy(image, members, dest))


@patches.command("check")
@click.option("--source", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="tree holding the package directories (site-packages, sdist root, checkout)")
@click.option("--pypi", "pypi", metavar="PKG==VERSION", help="a release from the package index, e.g. vllm==0.19.1")
@click.option("--image", help="a container image (its installed vllm/aiter files are copied out with Docker)")
@click.option("--index-url", help="package index (default: PIP_INDEX_URL / pip config / PyPI)")
@ids_opt
@version_opt
@stack_opt
@pass_ctx
@click.pass_context
def check_cmd(cctx: click.Context, ctx: Ctx, source: Path | None, pypi: str | None, image: str | None,
              index_url: str | None, ids: tuple[str, ...], versions: tuple[str, ...], stack_path: Path | None) -> None:
    """Say, per patch: applies / applies with offset or fuzz N / already upstream /
    not applicable (condition) / conflict (failing hunk and the lines it expected)."""
    from ..patches import State, check_release, check_stack, stack_hash

    given = [x for x in (source, pypi, image) if x]
    if len(given) != 1:
        raise click.UsageError("give exactly one of --source DIR, --pypi PKG==VERSION, --image IMAGE")
    stack = _stack(stack_path)
    sel = _ids(ids)
    vers = _versions(versions)
    if pypi:
        pkg, sep, ver = pypi.partition("==")
        if not sep or not pkg or not ver:
            raise BadInput(f"--pypi {pypi!r}: expected PACKAGE==VERSION, e.g. vllm==0.19.1")
        statuses = check_release(stack, sel, pkg.strip(), ver.strip(), index_url=index_url)
        where = f"{pkg}=={ver} (sdist from the package index)"
    elif image:
        specs = stack.select(sel)
        with tempfile.TemporaryDirectory(prefix="bisectbot-image-") as d:
            root = _image_root(image, sorted({f"{s.package}/{s.path}" for s in specs}), Path(d))
            statuses = check_stack(stack, sel, root, vers)
        for st in statuses:  # only the patch targets were copied out: say it of the image, not "this tree"
            if st.detail == f"no {st.package}/ package directory in this tree":
                st.detail = f"no {st.package} package installed in the image"
            elif st.detail.startswith("file ") and st.detail.endswith(" absent"):
                st.detail = st.detail.removesuffix(" absent") + " absent from the image's installed package"
        where = image
    else:
        assert source is not None
        statuses = check_stack(stack, sel, source, vers)
        where = str(source)
    chosen = [s.id for s in statuses]
    data = {"target": where, "stack_hash": stack_hash(stack, chosen), "patches": [s.to_dict() for s in statuses],
            "ok": all(s.ok or not s.required for s in statuses)}
    ctx.emit(data, _render(statuses, where) + f"\nstack hash: {data['stack_hash']}")
    if any(s.required and s.state is State.CONFLICT for s in statuses):
        cctx.exit(EXIT_BAD_INPUT)


@patches.command("apply")
@click.option("--source", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="tree holding the package directories (site-packages, sdist root, checkout)")
@ids_opt
@version_opt
@stack_opt
@pass_ctx
def apply_cmd(ctx: Ctx, source: Path, ids: tuple[str, ...], versions: tuple[str, ...],
              stack_path: Path | None) -> None:
    """Apply the stack to a tree: all patches or none (a required conflict leaves it
    byte-identical, exit 2); then byte-compile the touched Python files."""
    from ..patches import apply_stack

    stack = _stack(stack_path)
    app = apply_stack(stack, _ids(ids), source, _versions(versions))
    lines = [_render(app.statuses, f"{source} (applied)")]
    for path, h in app.files.items():
        same = " (unchanged)" if h["before"] == h["after"] else ""
        lines.append(f"  {path}: sha256 {h['before'][:16]} -> {h['after'][:16]}{same}")
    lines.append(f"stack hash: {app.stack_hash}\napplied hash: {app.applied_hash}")
    ctx.emit(app.to_dict(), "\n".join(lines))
