"""A service's input and output types made when first read.

Every resource module of a provider SDK service starts ``from . import outputs`` and
``from ._inputs import *``, and the service's ``_inputs`` defines each input type twice (a
``FooArgs`` class and a ``FooArgsDict`` TypedDict): 1,946 classes for GCP's compute and
1,362 output types beside them, about 0.5 s of a 2-core machine's time to run, most of it in
``typing`` building annotations. A plan uses a few dozen of them. Here the ``_inputs`` and
``outputs`` of a service ``sdk.by_class`` installs load as their preamble (the imports) and
an index: each class's name, bases, decorator and the body code object from the module's
own compiled code (the ``.pyc`` Python keeps; nothing is compiled again), kept between runs
by ``typestore`` (unless the cache is off) and read back from it. A class is made, with
the classes its text names, when it is first read -- an output type when the SDK resolves
``'outputs.Foo'`` -- or when a module of the service is imported: that module's
``import *`` of ``_inputs`` is given exactly the input types its source names, so
``typing.get_type_hints`` on its argument types (which the SDK calls to serialize a
resource) finds every name it would have found. But for the ``FooArgsDict`` TypedDicts: a
resource module names them only in its signatures' string annotations, which the SDK never
evaluates, and each costs a ``typing`` check per field (half the classes a plan made, 5% of
a cold ``plan examples/``), so they are left out unless the text names one outside a
string, and made, with what they name, when read from ``_inputs`` (or the service).

A module of any other shape (a statement at column 0 that is not one class, another
decorator than ``@pulumi.input_type``/``output_type``) runs whole, as without this module
(``WHOLE``): slower, never wrong. A service whose ``__init__`` must run (``sdk.FULL_LOADS``)
first gets every class (``make_all``).
"""

from __future__ import annotations

import builtins
import importlib.abc
import importlib.machinery
import re
import sys
import threading
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import typestore
from .sdktext import DICT, bare_dict, source_of

# ``_inputs`` and ``outputs`` modules that ran whole (a shape this module does not know)
WHOLE: list[str] = []
# ``_inputs`` and ``outputs`` modules whose index was read from the store (``typestore``)
STORED: list[str] = []

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


class _Index:
    """A module's classes (in the source's order), each class's body code and the classes
    its definition names."""

    def __init__(self, classes: Mapping[str, _Class]) -> None:
        self.classes = classes

    @property
    def names(self) -> list[str]:
        """Every class, in the source's order: the module's ``__all__``."""
        return list(self.classes)

    def body(self, name: str) -> types.CodeType:
        raise NotImplementedError

    def refs(self, name: str) -> Iterable[str]:
        raise NotImplementedError


class _TextIndex(_Index):
    """An index built from the module's text and compiled code."""

    def __init__(self, source: str, classes: dict[str, _Class],
                 bodies: dict[str, types.CodeType], texts: dict[str, slice]) -> None:
        super().__init__(classes)
        self.source, self.bodies, self.texts = source, bodies, texts

    def body(self, name: str) -> types.CodeType:
        return self.bodies[name]

    def refs(self, name: str) -> Iterable[str]:
        return (r for r in _NAME.findall(self.source[self.texts[name]]) if r in self.classes)

    def entries(self) -> list[typestore.Entry]:
        """Every class as the store keeps it."""
        return [typestore.Entry(name, c.bases, c.decorator,
                                tuple(dict.fromkeys(r for r in self.refs(name) if r != name)),
                                self.bodies[name]) for name, c in self.classes.items()]


class _StoredClasses(Mapping[str, _Class]):
    """A stored index's classes, each made a ``_Class`` when looked up."""

    def __init__(self, stored: typestore.Stored) -> None:
        self.raw = stored.classes
        self.positions = {n: i for i, n in enumerate(self.raw)}

    def __getitem__(self, name: str) -> _Class:
        bases, decorator, *_ = self.raw[name]
        return _Class(self.positions[name], bases, decorator)

    def __contains__(self, name: object) -> bool:
        return name in self.raw

    def __iter__(self) -> Iterator[str]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)


class _StoredIndex(_Index):
    """An index read back from the store (``typestore``). A class's part that does not read
    back (the entry damaged after its header was checked) is taken from the index
    ``rebuild`` makes of the module's text instead, from then on."""

    def __init__(self, stored: typestore.Stored,
                 rebuild: Callable[[], _TextIndex | None]) -> None:
        super().__init__(_StoredClasses(stored))
        self.stored, self.rebuild = stored, rebuild
        self.text: _TextIndex | None = None

    def _fallback(self) -> _TextIndex:
        if self.text is None:
            self.text = self.rebuild()
            if self.text is None:
                raise ImportError("a stored type index did not read back, and its module's "
                                  "text is no longer one class after another")
        return self.text

    def _part(self, name: str) -> tuple[Iterable[str], types.CodeType]:
        """The classes ``name``'s text names and its body: stored, else from the text."""
        if self.text is None:
            try:
                return self.stored.refs(name), self.stored.body(name)
            except (ValueError, EOFError, TypeError, OSError):
                pass
        text = self._fallback()
        return text.refs(name), text.body(name)

    def body(self, name: str) -> types.CodeType:
        return self._part(name)[1]

    def refs(self, name: str) -> Iterable[str]:
        return self._part(name)[0]


_INDEXES: dict[str, _Index] = {}  # module name -> its index, while not every class is made
_LOCK = threading.RLock()


def _split(source: str, code: types.CodeType, decorator: str
           ) -> tuple[str, _TextIndex] | None:
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
    classes = {name: _Class(start, bases, made_by) for start, name, bases, made_by in starts}
    texts = {name: slice(start, end) for (start, name, *_), end in zip(starts, ends, strict=True)}
    return source[: tops[first][0]], _TextIndex(source, classes, bodies, texts)


def _closure(index: _Index, names: Iterable[str], dicts: bool = True) -> list[str]:
    """``names`` (those the index holds) with every class their definitions name, in the
    source's order (``dicts=False``: no ``ArgsDict`` taken or followed)."""
    def taken(n: str) -> bool:
        return dicts or not n.endswith(DICT)
    todo = [n for n in names if n in index.classes and taken(n)]
    seen = set(todo)
    while todo:
        for ref in index.refs(todo.pop()):
            if ref not in seen and taken(ref):
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
        body = types.FunctionType(index.body(name), space, name)
        bases = (space[b] if b in space else getattr(builtins, b) for b in found.bases)
        made = builtins.__build_class__(body, name, *bases)
        if found.decorator is not None:
            made = getattr(space["pulumi"], found.decorator)(made)
        space[name] = made


def imported(name: str) -> types.ModuleType:
    """Module ``name``, imported the way an ``import`` statement imports it, so that
    ``python -X importtime`` reports it (``importlib.import_module`` is not seen there)."""
    __import__(name)
    return sys.modules[name]


class _Types(types.ModuleType):
    """An ``_inputs`` or ``outputs`` whose classes are made when first read."""

    def __getattr__(self, attr: str) -> Any:
        index = _INDEXES.get(self.__name__)
        if index is None or attr not in index.classes:
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
        _make(self, index, _closure(index, [attr]))
        return self.__dict__[attr]


def make_all(service: str) -> None:
    """Every class of ``service``'s ``_inputs`` and ``outputs`` made and ``__all__`` whole, as
    a plain import leaves them (before the service's ``__init__`` runs ``import *`` on them)."""
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
        key = typestore.key(name, self.plain.path)
        stored = typestore.load(key) if key is not None else None
        index: _Index
        if stored is not None and key is not None:
            STORED.append(name)
            preamble, index = stored.preamble, _StoredIndex(stored, lambda: self._again(key))
        else:
            code, built = self._build(name, key)
            if built is None:  # another shape, or text not in UTF-8
                WHOLE.append(name)
                object.__setattr__(module, "__class__", types.ModuleType)
                exec(code, module.__dict__)  # the module as a plain import runs it
                return
            preamble, index = built
        exec(preamble, module.__dict__)
        _INDEXES[name] = index
        if name.endswith("._inputs"):  # ``import *`` is handed each importer's own names
            module.__dict__["__all__"] = []

    def _build(self, name: str, key: typestore.Key | None
               ) -> tuple[types.CodeType, tuple[types.CodeType, _TextIndex] | None]:
        """The module's compiled code, and its preamble's code and index made from its text
        (None: the text is not UTF-8 or its shape is not one class after another), stored
        under ``key`` (None: the cache is off)."""
        code = self.plain.get_code(name)
        if code is None:
            raise ImportError(f"no code for {name}", name=name)
        source = source_of(self.plain)
        split = None if source is None else _split(source, code, self.decorator)
        if split is None:
            return code, None
        preamble = compile(split[0], self.plain.path, "exec")
        if key is not None:
            typestore.save(key, preamble, split[1].entries())
        return code, (preamble, split[1])

    def _again(self, key: typestore.Key) -> _TextIndex | None:
        """The index made from the text again, and stored again, when a stored part did not
        read back."""
        _, built = self._build(key[0], key)
        return None if built is None else built[1]


class _ModuleLoader(importlib.abc.Loader):
    """A module of a service: its ``import *`` of ``_inputs`` gets the classes it names."""

    def __init__(self, plain: importlib.machinery.SourceFileLoader, service: str) -> None:
        self.plain = plain
        self.service = service

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.plain.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        inputs_name = f"{self.service}._inputs"
        source = source_of(self.plain)
        index = None
        if source is None:  # what it names is unknown: its ``import *`` takes every type
            _whole(self.service)
        elif "from ._inputs import *" in source:
            inputs = imported(inputs_name)  # its index (None: made whole), before ``import *``
            index = _INDEXES.get(inputs_name)
        if source is None or index is None:
            self.plain.exec_module(module)
            return
        names = _closure(index, set(_NAME.findall(source)), dicts=bare_dict(source))
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
