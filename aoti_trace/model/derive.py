"""pydantic models derived mechanically from plain dataclasses, for validation and JSON Schema only.

What an analysis handles (the rule set read from the cache, the findings) is made of frozen dataclasses, so that
``aoti-trace analyze`` does not import pydantic (~0.1 s of start-up, issue 12). Each concept is still defined once,
as a dataclass: where a document is validated (a rule file) or a JSON Schema is exported, :func:`derive` builds the
pydantic model of a dataclass from it, and :func:`to_dataclass` turns a validated model back into the dataclass.

The model of a dataclass has its name, its docstring (not the one :mod:`dataclasses` writes when there is none), its
fields in order with their types and defaults, and

* each field's ``metadata``, which holds keyword arguments of :func:`pydantic.Field` (``alias``, ``description``,
  ``pattern``, ``ge``, ...);
* except a field whose metadata is :data:`EXTRA`: it is no key of the model, it holds the keys the model does not
  declare (the model is then built with ``extra="allow"``);
* the types of its fields with the dataclasses (and any other type) named in ``types`` replaced by what they map to
  (the derived models, or the name of one not built yet: a forward reference resolved by ``model_rebuild``).
"""

from __future__ import annotations

import dataclasses
import inspect
import types as _types
import typing
from typing import Any, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

EXTRA: dict[str, bool] = {"extra": True}  # the metadata of the field that receives the undeclared keys

_DATACLASS_OF: dict[type[BaseModel], type[Any]] = {}  # derived model -> its dataclass


def derive(cls: type[Any], module: str, config: ConfigDict, types: dict[Any, Any] | None = None,
           validators: dict[str, Any] | None = None) -> type[BaseModel]:
    """The pydantic model of dataclass ``cls`` (see the module docstring), defined in ``module`` (where its forward
    references are resolved); ``validators``: name -> a function decorated by pydantic's ``field_validator`` /
    ``model_validator``."""
    hints = typing.get_type_hints(cls, include_extras=True)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.metadata == EXTRA:
            config = ConfigDict(config, extra="allow")  # type: ignore[misc]
            continue
        kwargs = dict(f.metadata)
        if f.default is not dataclasses.MISSING:
            kwargs["default"] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            kwargs["default_factory"] = f.default_factory
        fields[f.name] = (_replace(hints[f.name], types or {}), Field(**kwargs))
    model: type[BaseModel] = create_model(
        cls.__name__, __config__=config, __doc__=_own_doc(cls), __module__=module,
        __validators__=validators or {}, **fields)
    _DATACLASS_OF[model] = cls
    return model


def to_dataclass(value: Any) -> Any:
    """``value`` with every derived model instance in it (also in lists and dicts) turned into its dataclass."""
    if isinstance(value, BaseModel):
        cls = _DATACLASS_OF[type(value)]
        kwargs = {f.name: (dict(value.model_extra or {}) if f.metadata == EXTRA else to_dataclass(getattr(value, f.name)))
                  for f in dataclasses.fields(cls)}
        return cls(**kwargs)
    if isinstance(value, list):
        return [to_dataclass(v) for v in value]
    if isinstance(value, dict):
        return {k: to_dataclass(v) for k, v in value.items()}
    return value


def _replace(tp: Any, types: dict[Any, Any]) -> Any:
    if isinstance(tp, typing.Hashable) and tp in types:
        return types[tp]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if not args or origin in (typing.Literal, typing.Annotated):
        return tp
    new = tuple(_replace(a, types) for a in args)
    if new == args:
        return tp
    if origin in (Union, _types.UnionType):
        return Union[new]
    return origin[new]


def _own_doc(cls: type[Any]) -> str | None:
    """The class's docstring, or None where :mod:`dataclasses` made one up from the signature."""
    doc = cls.__doc__
    made_up = cls.__name__ + str(inspect.signature(cls)).replace(" -> None", "")
    return None if doc == made_up else doc
