"""Cost models from other distributions: the entry-point group `xla_costmodel.models`.

A distribution adds a model by declaring, in its `pyproject.toml`,

    [project.entry-points."xla_costmodel.models"]
    my-model = "my_package:MyModel"

where `MyModel` is a class or factory: `MyModel(**params)` must return an
object with the `CostModel` protocol (`name`, `estimate`).
`get_model("my-model")` imports it on first use; `model_names()` lists it
without importing it. Built-in names win over plugins of the same name
(`model_names()` warns about the hidden plugin); two distributions declaring
one name make `get_model(name)` raise `ModelPluginError` naming both.

A plugin that cannot be imported, or that builds something that is not a
cost model, raises `ModelPluginError` naming the plugin, its entry point and
its distribution.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["ENTRY_POINT_GROUP", "ModelPluginError", "describe_entry_point", "load_plugin"]

#: The entry-point group a distribution declares its cost models in.
ENTRY_POINT_GROUP = "xla_costmodel.models"


class ModelPluginError(ImportError):
    """A cost-model plugin could not be loaded or did not build a cost model."""


def describe_entry_point(ep: Any) -> str:
    """`'name = module:attr' (group 'xla_costmodel.models', distribution 'dist 1.0')` for messages."""
    name = getattr(ep, "name", "?")
    value = getattr(ep, "value", None)
    spelled = f"'{name} = {value}'" if value else f"'{name}'"
    dist = getattr(ep, "dist", None)
    where = f"group '{getattr(ep, 'group', None) or ENTRY_POINT_GROUP}'"
    if dist is not None:
        try:
            where += f", distribution '{dist.name} {dist.version}'"
        except Exception:  # a distribution without readable metadata still names its entry point
            pass
    return f"{spelled} ({where})"


def load_plugin(ep: Any) -> Callable[..., Any]:
    """The factory of a plugin's entry point, checked.

    **Arguments:** `ep`: an `importlib.metadata.EntryPoint` (anything with
    `name` and `load()`).

    **Returns:** a factory `f(**params)` that builds the plugin's model and
    checks that it is a `CostModel`.

    **Raises:** `ModelPluginError` naming the plugin and its entry point when
    the import fails or the object is not callable.
    """
    name = getattr(ep, "name", "?")
    try:
        target = ep.load()
    except Exception as exc:
        raise ModelPluginError(
            f"cost-model plugin {name!r} failed to load: entry point {describe_entry_point(ep)}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not callable(target):
        raise ModelPluginError(
            f"cost-model plugin {name!r}: entry point {describe_entry_point(ep)} names a "
            f"{type(target).__name__}, not a model class or factory"
        )

    def build(**params):
        try:
            model = target(**params)
        except Exception as exc:
            exc.add_note(f"while building cost-model plugin {name!r} from entry point {describe_entry_point(ep)}")
            raise
        # The `CostModel` protocol's members (`models._base`, which builds on this module).
        missing = [a for a in ("name", "estimate") if not hasattr(model, a)]
        if missing:
            raise ModelPluginError(
                f"cost-model plugin {name!r}: entry point {describe_entry_point(ep)} built a "
                f"{type(model).__name__} without {', '.join(missing) or 'the CostModel protocol'} "
                f"(a cost model needs name and estimate(kernel, device))"
            )
        return model

    build.__wrapped__ = target  # type: ignore[attr-defined]
    build.__name__ = getattr(target, "__name__", name)
    build.__doc__ = getattr(target, "__doc__", None)
    return build
