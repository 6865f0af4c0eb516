"""A service's input and output types made when first read.

Every resource module of a provider SDK service starts ``from . import outputs`` and
``from ._inputs import *``, and the service's ``_inputs`` defines each input type twice (a
``FooArgs`` class and a ``FooArgsDict`` TypedDict): 1,946 classes for GCP's compute and
1,362 output types beside them, about 0.5 s of a 2-core machine's time to run, most of it in
``typing`` building annotations. A plan uses a few dozen of them. Here the ``_inputs`` and
``outputs`` of a service ``sdk.by_class`` installs load as their preamble (the imports) and
an index: each class's name, bases, decorator and the body code object from the module's
own compiled code (the ``.pyc`` Python keeps; nothing is compiled again and nothing is
written). A class is made, with the classes its text names, when it is first read -- an
output type when the SDK resolves ``'outputs.Foo'`` -- or when a module of the service is
imported: that module's ``import *`` of ``_inputs`` is given exactly the input types its
source names, so ``typing.get_type_hints`` on its argument types (which the SDK calls to
serialize a resource) finds every name it would have found.

A module of any other shape (a statement at column 0 that is not one class, a decorator
other than ``@pulumi.input_type``/``@pulumi.output_type``) runs whole, as without this
module, and is counted in ``WHOLE``: slower, never wrong. A service whose own ``__init__``
must run (``sdk.FULL_LOADS``) first gets every class (``make_all``).
"""

from __future__ import annotations

import builtins
import importlib.abc
import importlib.machinery
import re
import sys
import threading
import types
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# ``_inputs`` and ``outputs`` modules that ran whole: their shape was not the one this
# module knows
WHOLE: list[str] = []

# a line at column 0 that is not a comment (its offset is the match's plus one); a search for
# the newline is five times as fast as ``^`` in MULTILINE mode on 4.8 MB
_TOP = re.compile(r"\n[^ \t\n#][^\n]*")
_CLASS = re.compile(r"class (\w+)(?:\(([\w, ]*)\))?:\s*$")
# the modules of a service made class by class, with the decorator their classes may have
_DECORATORS = {"_inputs": "input_type", "outputs": "output_type"}
_NAME = re.compile(r"[A-Z]\w*")  # what an input type's name looks like in a text
_SERVICES: set[str] = set()  # the services whose modules this module loads


@dataclass(frozen=True)
class _Class:
    position: int  # in the source, to make classes in the order the source defines them
    bases: tuple[str, ...]
    decorator: str | None  # the ``pulumi`` attribute the class is decorated with
    body: types.CodeType
    text: slice  # of the source: what the class's definition names


@dataclass(frozen=True)
class _Index:
    source: str
    classes: dict[str, _Class]  # in the source's order

    @property
    def names(self) -> list[str]:
        """Every class, in the source's order: the module's ``__all__``."""
        return list(self.classes)


_INDEXES: dict[str, _Index] = {}  # module name -> its index, while not every class is made
_LOCK = threading.RLock()


def _split(source: str, code: types.CodeType, decorator: str
           ) -> tuple[str, dict[str, _Class]] | None:
    """The preamble's text and the index of an ``_inputs`` or ``outputs`` module (whose
    classes may be decorated with ``@pulumi.<decorator>``), or None when its shape is not
    one class after another."""
    bodies: dict[str, types.CodeType] = {}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_name in bodies:
                return None
            bodies[const.co_name] = const
    tops = [(m.start() + 1, m.group()[1:]) for m in _TOP.finditer(source)]
    first = next((i for i, (_, line) in enumerate(tops)
                  if line.startswith(("class ", "@"))), None)
    if first is None:
        return None
    starts: list[tuple[int, str, tuple[str, ...], str | None]] = []
    decorated: int | None = None  # where the pending decorator's line starts
    for offset, line in tops[first:]:
        if line.rstrip() == f"@pulumi.{decorator}" and decorated is None:
            decorated = offset
            continue
        match = _CLASS.match(line)
        if match is None or match.group(1) not in bodies:
            return None
        bases = tuple(b.strip() for b in (match.group(2) or "").split(",") if b.strip())
        starts.append((offset if decorated is None else decorated, match.group(1), bases,
                       None if decorated is None else decorator))
        decorated = None
    if decorated is not None or len({s[1] for s in starts}) != len(starts):
        return None
    ends = [s[0] for s in starts[1:]] + [len(source)]
    classes = {name: _Class(start, bases, made_by, bodies[name], slice(start, end))
               for (start, name, bases, made_by), end in zip(starts, ends, strict=True)}
    return source[: tops[first][0]], classes


def _closure(index: _Index, names: Iterable[str]) -> list[str]:
    """``names`` (those the index holds) with every class their definitions name, in the
    source's order."""
    todo = [n for n in names if n in index.classes]
    seen = set(todo)
    while todo:
        found = index.classes[todo.pop()]
        for ref in _NAME.findall(index.source[found.text]):
            if ref in index.classes and ref not in seen:
                seen.add(ref)
                todo.append(ref)
    return sorted(seen, key=lambda n: index.classes[n].position)


def _make(module: types.ModuleType, index: _Index, names: Sequence[str]) -> None:
    """Make ``names`` (in the source's order) into ``module`` as its ``class`` statements
    would: the body run by ``__build_class__`` on the bases, then the decorator. Under a
    lock: a class read from two threads at once is still made once."""
    with _LOCK:
        _make_unlocked(module.__dict__, index, names)


def _make_unlocked(space: dict[str, Any], index: _Index, names: Sequence[str]) -> None:
    for name in names:
        if name in space:
            continue
        found = index.classes[name]
        body = types.FunctionType(found.body, space, name)
        bases = (space[b] if b in space else getattr(builtins, b) for b in found.bases)
        made = builtins.__build_class__(body, name, *bases)
        if found.decorator is not None:
            made = getattr(space["pulumi"], found.decorator)(made)
        space[name] = made


def _source(loader: importlib.machinery.SourceFileLoader) -> str | None:
    """A generated module's text, read as UTF-8 (its declared coding) without the tokenizer
    ``get_source`` runs to find the coding (twice as fast on 4.8 MB); None if it is not."""
    try:
        return loader.get_data(loader.path).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def imported(name: str) -> types.ModuleType:
    """Module ``name``, imported the way an ``import`` statement imports it, so that
    ``python -X importtime`` reports it (``importlib.import_module`` is not seen there)."""
    __import__(name)
    return sys.modules[name]


class _Types(types.ModuleType):
    """An ``_inputs`` or ``outputs`` whose classes are made when first read; see the
    module's docstring."""

    def __getattr__(self, attr: str) -> Any:
        index = _INDEXES.get(self.__name__)
        if index is None or attr not in index.classes:
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
        _make(self, index, _closure(index, [attr]))
        return self.__dict__[attr]


def make_all(service: str) -> None:
    """Every class of ``service``'s ``_inputs`` and ``outputs`` made and ``__all__`` whole,
    as a plain import leaves them (before the service's own ``__init__`` runs ``import *``
    on them)."""
    for leaf in _DECORATORS:
        name = f"{service}.{leaf}"
        module, index = sys.modules.get(name), _INDEXES.pop(name, None)
        if module is not None and index is not None:
            _make(module, index, index.names)
            module.__dict__["__all__"] = list(index.names)


def _whole(service: str) -> None:
    """``service``'s types made whole from now on: those made lazily already, and its
    ``_inputs`` and ``outputs`` imported plainly if they are not yet."""
    _SERVICES.discard(service)
    make_all(service)


class _TypesLoader(importlib.abc.Loader):
    def __init__(self, plain: importlib.machinery.SourceFileLoader, decorator: str) -> None:
        self.plain = plain
        self.decorator = decorator

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _Types(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        code = self.plain.get_code(name)
        source = _source(self.plain)
        if code is None:
            raise ImportError(f"no code for {name}", name=name)
        if source is None or (split := _split(source, code, self.decorator)) is None:
            WHOLE.append(name)
            object.__setattr__(module, "__class__", types.ModuleType)
            exec(code, module.__dict__)  # the module as a plain import runs it
            return
        preamble, classes = split
        exec(compile(preamble, self.plain.path, "exec"), module.__dict__)
        _INDEXES[name] = _Index(source, classes)
        if name.endswith("._inputs"):  # ``import *`` is handed each importer's own names
            module.__dict__["__all__"] = []


class _ModuleLoader(importlib.abc.Loader):
    """A module of a service: its ``import *`` of ``_inputs`` gets the classes it names."""

    def __init__(self, plain: importlib.machinery.SourceFileLoader, service: str) -> None:
        self.plain = plain
        self.service = service

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.plain.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        inputs_name = f"{self.service}._inputs"
        source = _source(self.plain)
        index = None
        if source is None:  # what it names is unknown: its ``import *`` takes every type
            _whole(self.service)
        elif "from ._inputs import *" in source:
            inputs = imported(inputs_name)  # its index (None: made whole), before ``import *``
            index = _INDEXES.get(inputs_name)
        if source is None or index is None:
            self.plain.exec_module(module)
            return
        names = _closure(index, set(_NAME.findall(source)))
        _make(inputs, index, names)
        inputs.__dict__["__all__"] = names
        try:
            self.plain.exec_module(module)
        finally:
            inputs.__dict__["__all__"] = []


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None
                  ) -> importlib.machinery.ModuleSpec | None:
        service, _, leaf = fullname.rpartition(".")
        if service not in _SERVICES or leaf in ("_enums", "_utilities"):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            if spec is not None and leaf not in _DECORATORS:
                _whole(service)  # no text to read what it names (a .pyc alone)
            return spec
        if leaf in _DECORATORS:
            spec.loader = _TypesLoader(spec.loader, _DECORATORS[leaf])
        else:
            spec.loader = _ModuleLoader(spec.loader, service)
        return spec


_FINDER = _Finder()


def lazy(service: str) -> None:
    """Load ``service``'s ``_inputs`` and the modules that use it as the module's docstring
    says, from now on (modules imported already keep what they have)."""
    if f"{service}._inputs" in sys.modules:
        return  # imported whole already: its classes are the ones in use
    _SERVICES.add(service)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
