"""Apply htmx out-of-band swaps to a page, the way the browser does, for verify_action tests.

A page is parsed into a small element tree (``html.parser``); ``apply(page, push)`` swaps each
top-level element of ``push`` that carries ``hx-swap-oob``: ``true`` replaces the element with
the same id, ``outerHTML:#id`` replaces the element ``id`` with it, ``beforeend:#id`` /
``afterbegin:#id`` put the element's children at the end / the start of the target,
``afterend:#id`` right after it, and ``delete`` removes the element with the same id (as htmx
does, nothing happens when there is none: the Timeline's patches rely on it). ``html()``
serialises the tree again, so a patched page can be compared with one rendered fresh.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"br", "hr", "img", "input", "meta", "link", "source", "wbr", "col", "area", "base", "embed"}


@dataclass
class Node:
    tag: str
    attrs: list[tuple[str, str | None]] = field(default_factory=list)
    children: list[Node | str] = field(default_factory=list)

    def attr(self, name: str) -> str | None:
        return next((v for k, v in self.attrs if k == name), None)

    def html(self) -> str:
        inner = "".join(c if isinstance(c, str) else c.html() for c in self.children)
        if self.tag == "#root":
            return inner
        attrs = "".join(f' {k}="{v}"' if v is not None else f" {k}" for k, v in self.attrs if k != "hx-swap-oob")
        return f"<{self.tag}{attrs}>" if self.tag in VOID else f"<{self.tag}{attrs}>{inner}</{self.tag}>"

    def find(self, id: str) -> Node | None:
        if self.attr("id") == id:
            return self
        for child in self.children:
            if isinstance(child, Node) and (found := child.find(id)) is not None:
                return found
        return None

    def parent_of(self, id: str) -> tuple[Node, int] | None:
        for index, child in enumerate(self.children):
            if isinstance(child, Node):
                if child.attr("id") == id:
                    return self, index
                if (found := child.parent_of(id)) is not None:
                    return found
        return None

    def replace(self, id: str, new: Node) -> bool:
        for index, child in enumerate(self.children):
            if isinstance(child, Node):
                if child.attr("id") == id:
                    self.children[index] = new
                    return True
                if child.replace(id, new):
                    return True
        return False


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.root = Node("#root")
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, attrs)
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)

    def handle_entityref(self, name: str) -> None:
        self.stack[-1].children.append(f"&{name};")

    def handle_charref(self, name: str) -> None:
        self.stack[-1].children.append(f"&#{name};")


def parse(html: str) -> Node:
    parser = _Parser()
    parser.feed(html)
    parser.close()
    return parser.root


def apply(page: Node, push: str) -> None:
    """Swap every out-of-band element of ``push`` into ``page`` (in order); a target that is
    missing is an error (htmx would drop the swap silently: a test must see it)."""
    for node in parse(push).children:
        if not isinstance(node, Node):
            continue
        how = node.attr("hx-swap-oob")
        if how is None:
            continue
        if how == "true":
            id = node.attr("id") or ""
            assert page.replace(id, node), f"no element #{id} to replace"
        elif how.startswith("outerHTML:#"):
            id = how.split("#", 1)[1]
            assert page.replace(id, node), f"no element #{id} to replace"
        elif how.startswith("beforeend:#"):
            target = page.find(how.split("#", 1)[1])
            assert target is not None, f"no element for {how}"
            target.children.extend(node.children)
        elif how.startswith("afterbegin:#"):
            target = page.find(how.split("#", 1)[1])
            assert target is not None, f"no element for {how}"
            target.children[0:0] = node.children
        elif how.startswith("afterend:#"):
            found = page.parent_of(how.split("#", 1)[1])
            assert found is not None, f"no element for {how}"
            parent, index = found
            parent.children[index + 1 : index + 1] = node.children
        elif how == "delete":
            found = page.parent_of(node.attr("id") or "")
            if found is not None:
                del found[0].children[found[1]]
        else:
            raise AssertionError(f"unsupported swap {how}")
